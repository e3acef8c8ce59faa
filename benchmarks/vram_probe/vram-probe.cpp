// What llama.cpp would allocate per buffer type for a model header and context settings,
// without allocating: the model comes from a metadata-only GGUF (llama_model_init_from_user,
// no_alloc), the context is created as llama-server would create it, and
// llama_get_memory_breakdown gives model / context (KV, recurrent state) / compute bytes.
//
// usage: llama-vram-probe CASES.tsv
// each line: name  gguf  n_ctx  n_batch  n_ubatch  n_seq  type_k  type_v  flash_attn(-1/0/1)
//            n_gpu_layers  kv_unified(0/1)  swa_full(0/1)
#include "llama.h"
#include "ggml.h"
#include "ggml-backend.h"
#include "gguf.h"
#include "../src/llama-ext.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

static void no_data(struct ggml_tensor *, void *) {}

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
    if (argc != 2) {
        fprintf(stderr, "usage: %s CASES.tsv\n", argv[0]);
        return 2;
    }
    llama_backend_init();
    std::ifstream in(argv[1]);
    std::string line;
    printf("case\tbuffer\tmodel\tcontext\tcompute\n");
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
        llama_model * model = llama_model_init_from_user(meta, no_data, nullptr, mp);
        if (!model) {
            printf("%s\tERROR\tmodel\n", name.c_str());
            fflush(stdout);
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
