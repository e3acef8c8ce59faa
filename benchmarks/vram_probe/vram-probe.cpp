// What llama.cpp would allocate per buffer type for a model header and context settings,
// without allocating: the model comes from a metadata-only GGUF (llama_model_init_from_user,
// no_alloc), the context is created as llama-server would create it, and
// llama_get_memory_breakdown gives model / context (KV, recurrent state) / compute bytes.
//
// usage: llama-vram-probe [--tensors] CASES.tsv
// each line: name  gguf  n_ctx  n_batch  n_ubatch  n_seq  type_k  type_v  flash_attn(-1/0/1)
//            n_gpu_layers  kv_unified(0/1)  swa_full(0/1)  [cpu_regex]
// cpu_regex keeps the weights it matches in RAM (llama-server's -ot REGEX=CPU, --n-cpu-moe);
// --tensors prints each case's weights (name, type, shape) instead of its memory.
// VRAM_PROBE_RPC=HOST:PORT[,...] adds rpc-server devices (a build with GGML_RPC), as --rpc does:
// a device fed from the host, as a GPU is, on a machine without one.
#include "llama.h"
#include "ggml.h"
#include "ggml-backend.h"
#include "gguf.h"
#include "../src/llama-ext.h"
#include "../src/llama-model.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

static void no_data(struct ggml_tensor *, void *) {}

typedef ggml_backend_reg_t (*rpc_add_server_t)(const char * endpoint);

// the rpc-server devices VRAM_PROBE_RPC names, registered as common/arg.cpp's --rpc does
static bool add_rpc_devices() {
    const char * servers = getenv("VRAM_PROBE_RPC");
    if (!servers || !*servers) {
        return true;
    }
    ggml_backend_reg_t reg = ggml_backend_reg_by_name("RPC");
    void * fn = reg ? ggml_backend_reg_get_proc_address(reg, "ggml_backend_rpc_add_server") : nullptr;
    auto add = (rpc_add_server_t) fn;
    if (!add) {
        fprintf(stderr, "VRAM_PROBE_RPC set, but this build has no RPC backend\n");
        return false;
    }
    std::istringstream list(servers);
    std::string endpoint;
    while (std::getline(list, endpoint, ',')) {
        ggml_backend_register(add(endpoint.c_str()));
    }
    return true;
}

static ggml_type kv_type(const std::string & s) {
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        const char * name = ggml_type_name((ggml_type) t);
        if (name && s == name) {
            return (ggml_type) t;
        }
    }
    fprintf(stderr, "unknown cache type %s\n", s.c_str());
    exit(2);
}

int main(int argc, char ** argv) {
    const bool tensors = argc == 3 && std::string(argv[1]) == "--tensors";
    if (argc != 2 && !tensors) {
        fprintf(stderr, "usage: %s [--tensors] CASES.tsv\n", argv[0]);
        return 2;
    }
    llama_backend_init();
    if (!add_rpc_devices()) {
        return 2;
    }
    std::ifstream in(argv[argc - 1]);
    std::string line;
    printf(tensors ? "case\ttensor\ttype\tne0\tne1\tne2\tne3\n" : "case\tbuffer\tmodel\tcontext\tcompute\n");
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') {
            continue;
        }
        std::istringstream f(line);
        std::string name, path, tk, tv;
        int n_ctx, n_batch, n_ubatch, n_seq, fa, ngl, unified, swa_full;
        std::getline(f, name, '\t');
        std::getline(f, path, '\t');
        f >> n_ctx >> n_batch >> n_ubatch >> n_seq >> tk >> tv >> fa >> ngl >> unified >> swa_full;
        if (!f) {
            fprintf(stderr, "%s: bad case line\n", name.c_str());
            continue;
        }
        std::string cpu_regex;
        f >> cpu_regex;
        struct ggml_context * meta_ctx = nullptr;
        struct gguf_init_params gp = { /*no_alloc*/ true, &meta_ctx };
        struct gguf_context * meta = gguf_init_from_file(path.c_str(), gp);
        if (!meta) {
            printf("%s\tERROR\tcannot read %s\n", name.c_str(), path.c_str());
            fflush(stdout);
            continue;
        }
        llama_model_params mp = llama_model_default_params();
        mp.n_gpu_layers = ngl;
        mp.no_alloc = true;
        const llama_model_tensor_buft_override overrides[] = {
            { cpu_regex.c_str(), ggml_backend_cpu_buffer_type() }, { nullptr, nullptr } };
        if (!cpu_regex.empty()) {
            mp.tensor_buft_overrides = overrides;
        }
        llama_model * model = llama_model_init_from_user(meta, no_data, nullptr, mp);
        if (!model) {
            printf("%s\tERROR\tmodel\n", name.c_str());
            fflush(stdout);
            gguf_free(meta);
            continue;
        }
        if (tensors) {
            for (const auto & [tname, t] : model->tensors_by_name) {
                printf("%s\t%s\t%s\t%lld\t%lld\t%lld\t%lld\n", name.c_str(), tname.c_str(),
                       ggml_type_name(t->type), (long long) t->ne[0], (long long) t->ne[1],
                       (long long) t->ne[2], (long long) t->ne[3]);
            }
            fflush(stdout);
            llama_model_free(model);
            gguf_free(meta);
            continue;
        }
        llama_context_params cp = llama_context_default_params();
        cp.n_ctx = n_ctx;
        cp.n_batch = n_batch;
        cp.n_ubatch = n_ubatch;
        cp.n_seq_max = n_seq;
        cp.type_k = kv_type(tk);
        cp.type_v = kv_type(tv);
        cp.flash_attn_type = (llama_flash_attn_type) fa;
        cp.kv_unified = unified != 0;
        cp.swa_full = swa_full != 0;
        llama_context * ctx = llama_init_from_model(model, cp);
        if (!ctx) {
            printf("%s\tERROR\tcontext\n", name.c_str());
        } else {
            for (const auto & [buft, mb] : llama_get_memory_breakdown(ctx)) {
                printf("%s\t%s\t%zu\t%zu\t%zu\n", name.c_str(), ggml_backend_buft_name(buft),
                       mb.model, mb.context, mb.compute);
            }
            llama_free(ctx);
        }
        fflush(stdout);
        llama_model_free(model);
        gguf_free(meta);
        if (meta_ctx) {
            ggml_free(meta_ctx);
        }
    }
    llama_backend_free();
    return 0;
}
