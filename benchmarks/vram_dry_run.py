"""provision.vram's estimate against llama.cpp's own dry run, per case, on the backend it ran on.

llama.cpp can build a model from its header alone and create a context without allocating
(llama_model_init_from_user with no_alloc, then llama_get_memory_breakdown: what `--fit` uses);
benchmarks/vram_probe/ holds a small program that does that for a list of cases. Both sides read
the same metadata-only GGUF, so the comparison is of the model, not of the inputs.

  python -m benchmarks.vram_dry_run write DIR       # DIR/<model>.gguf and DIR/cases.tsv
  llama-vram-probe DIR/cases.tsv > RESULTS.tsv      # on the machine whose backend is measured
  python -m benchmarks.vram_dry_run compare RESULTS.tsv [DIR]

Recorded results: tests/fixtures/recorded/vram_dry_run/ (its README says where they ran).
Model shapes are the published configs of the models named.
"""

from __future__ import annotations

import csv
import functools
import math
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from checks.services.gguf_header import GgufInfo, summary
from provision.vram import LlamaClaim, LlamaMemory, LlamaShare, llama_memory, llama_share

MiB = 2**20


def _qwen35(
    layers: int, embd: int, heads: int, kv: int, inner: int, v_heads: int, **more: int
) -> tuple[str, dict[str, Any], int]:
    """A Qwen3.5 header: every 4th layer attention (2 KV heads of 256 or so), the rest Gated
    DeltaNet with 16 key heads of 128 and `v_heads` value heads (inner = v_heads x 128); MoE
    when `more` has expert counts."""
    keys: dict[str, Any] = dict(block_count=layers, embedding_length=embd, **more)
    keys["full_attention_interval"] = 4
    keys |= {
        "attention.head_count": heads,
        "attention.head_count_kv": kv,
        "attention.key_length": 256,
        "attention.value_length": 256,
        "rope.dimension_count": 64,
        "rope.dimension_sections": [11, 11, 10, 0],
        "ssm.conv_kernel": 4,
        "ssm.inner_size": inner,
        "ssm.state_size": 128,
        "ssm.time_step_rank": v_heads,
        "ssm.group_count": 16,
    }
    return ("qwen35moe" if "expert_count" in more else "qwen35"), keys, 248320


# name: (architecture, keys under "<arch>.", vocabulary size)
MODELS: dict[str, tuple[str, dict[str, Any], int]] = {
    "llama-3.1-8b": (
        "llama",
        dict(
            block_count=32,
            embedding_length=4096,
            feed_forward_length=14336,
            **{
                "attention.head_count": 32,
                "attention.head_count_kv": 8,
                "rope.dimension_count": 128,
                "rope.freq_base": 500000.0,
            },
        ),
        128256,
    ),
    "qwen3-30b-a3b": (
        "qwen3moe",
        dict(
            block_count=48,
            embedding_length=2048,
            feed_forward_length=6144,
            expert_count=128,
            expert_used_count=8,
            expert_feed_forward_length=768,
            **{
                "attention.head_count": 32,
                "attention.head_count_kv": 4,
                "attention.key_length": 128,
                "attention.value_length": 128,
            },
        ),
        151936,
    ),
    "qwen3.5-0.8b": _qwen35(24, 1024, 8, 2, 2048, 16, feed_forward_length=3584),
    "qwen3.5-27b": _qwen35(64, 5120, 24, 4, 6144, 48, feed_forward_length=17408),
    "qwen3.5-35b-a3b": _qwen35(
        40,
        2048,
        16,
        2,
        4096,
        32,
        expert_count=256,
        expert_used_count=8,
        expert_feed_forward_length=512,
        expert_shared_feed_forward_length=512,
    ),
    "gemma-3-12b": (
        "gemma3",
        dict(
            block_count=48,
            embedding_length=3840,
            feed_forward_length=15360,
            **{
                "attention.head_count": 16,
                "attention.head_count_kv": 8,
                "attention.key_length": 256,
                "attention.value_length": 256,
                "attention.sliding_window": 1024,
            },
        ),
        262208,
    ),
    "gpt-oss-20b": (
        "gpt-oss",
        dict(
            block_count=24,
            embedding_length=2880,
            feed_forward_length=2880,
            expert_count=32,
            expert_used_count=4,
            expert_feed_forward_length=2880,
            **{
                "attention.head_count": 64,
                "attention.head_count_kv": 8,
                "attention.key_length": 64,
                "attention.value_length": 64,
                "attention.sliding_window": 128,
            },
        ),
        201088,
    ),
    "pythia-2.8b": (
        "gptneox",
        dict(
            block_count=32,
            embedding_length=2560,
            feed_forward_length=10240,
            use_parallel_residual=True,
            **{
                "attention.head_count": 32,
                "attention.head_count_kv": 32,
                "rope.dimension_count": 20,
                "attention.layer_norm_epsilon": 1e-5,
            },
        ),
        50304,
    ),
}

# (label, n_ctx, n_ubatch, n_seq, type_k, type_v, flash_attn, n_gpu_layers or -1 for all,
#  kv_unified): llama-server's defaults are n_batch 2048, n_ubatch 512, FA auto (on for CUDA).
SETTINGS = [
    ("4k", 4096, 512, 1, "f16", "f16", "on", -1, False),
    ("4k no-FA", 4096, 512, 1, "f16", "f16", "off", -1, False),
    ("32k q8_0", 32768, 512, 1, "q8_0", "q8_0", "on", -1, False),
    ("128k q4_0", 131072, 512, 1, "q4_0", "q4_0", "on", -1, False),
    ("262k q8_0 4 slots unified", 262144, 512, 4, "q8_0", "q8_0", "on", -1, True),
    ("8k ub2048", 8192, 2048, 1, "f16", "f16", "on", -1, False),
    ("8k half the layers", 8192, 512, 1, "f16", "f16", "on", 0, False),
]


# Partial offload and weights kept in RAM with a quantized model: the same headers with every
# weight llama.cpp builds for them (recorded by `llama-vram-probe --tensors`) typed as a Q4_K
# file would be (vectors, the router, conv and SSM parameters stay F32).
TENSORS = Path(__file__).parent.parent / "tests/fixtures/recorded/vram_dry_run"
TENSORS = TENSORS / "tensors_llamacpp-0c1e57098.tsv.gz"
TYPED = [
    ("q4_k 8k", 8192, 512, -1, ""),
    ("q4_k 8k half the layers", 8192, 512, 0, ""),
    ("q4_k 8k half the layers ub2048", 8192, 2048, 0, ""),
    ("q4_k 8k experts in RAM", 8192, 512, -1, "_exps"),
    ("q4_k 8k experts in RAM ub2048", 8192, 2048, -1, "_exps"),
]
_F32 = ("norm", "ssm_conv1d", "ssm_a", "ssm_d", "ssm_dt", "gate_inp", "sinks", "exp_probs")


def _weight_type(name: str, ne0: int, dims: int) -> tuple[int, float]:
    """(GGML type id, bytes per element) a Q4_K file would give this weight."""
    if dims < 2 or any(part in name for part in _F32) or not name.endswith(".weight"):
        return 0, 4.0  # F32
    if ne0 % 256 == 0:
        return 12, 144 / 256  # Q4_K
    if ne0 % 32 == 0:
        return 8, 34 / 32  # Q8_0
    return 0, 4.0


@functools.cache
def _all_tensors() -> dict[str, dict[str, tuple[int, ...]]]:
    """Per model, each weight's shape (outermost 1s dropped), read once; a name llama.cpp lists
    twice (rope_freqs in every layer) once."""
    import gzip

    found: dict[str, dict[str, tuple[int, ...]]] = {}
    with gzip.open(TENSORS, "rt") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            shape = tuple(int(row[k]) for k in ("ne0", "ne1", "ne2", "ne3"))
            while len(shape) > 1 and shape[-1] == 1:
                shape = shape[:-1]
            found.setdefault(row["case"].removesuffix(" 4k"), {}).setdefault(row["tensor"], shape)
    return found


def _tensors(model: str) -> list[tuple[str, tuple[int, ...]]]:
    return list(_all_tensors()[model].items())


def _gguf(path: Path, arch: str, keys: dict[str, Any], vocab: int, typed: str = "") -> None:
    import gguf  # the test extra's gguf package
    import numpy as np

    w = gguf.GGUFWriter(str(path), arch)
    w.add_context_length(262144)
    w.add_uint32(f"{arch}.vocab_size", vocab)
    w.add_string("tokenizer.ggml.model", "no_vocab")
    for key, value in keys.items():
        name = f"{arch}.{key}"
        if isinstance(value, bool):
            w.add_bool(name, value)
        elif isinstance(value, float):
            w.add_float32(name, value)
        elif isinstance(value, list):
            w.add_array(name, value)
        else:
            w.add_uint32(name, value)
    if "attention.layer_norm_epsilon" not in keys:
        w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)
    embd = keys["embedding_length"]
    data = 0
    if typed:
        for name, shape in _tensors(typed):
            ggml_type, per = _weight_type(name, shape[0], len(shape))
            count = math.prod(shape)
            nbytes = int(count * per)
            # gguf-py takes the shape outermost first and the byte count of the stored type
            w.add_tensor_info(
                name,
                tuple(reversed(shape)),
                np.dtype(np.float32),
                nbytes,
                raw_dtype=gguf.GGMLQuantizationType(ggml_type),
            )
            data += -(-nbytes // 32) * 32
    else:
        # The embedding's shape gives the vocabulary to gpuprov's header reader; F16 as in files.
        w.add_tensor_info(
            "token_embd.weight", (vocab, embd), np.dtype(np.float16), vocab * embd * 2
        )
        data = vocab * embd * 2
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    # The data section must exist for readers to seek to it: a sparse file of the full size.
    size = path.stat().st_size
    with path.open("r+b") as f:
        f.truncate(-(-size // 32) * 32 + data)


def write(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for model, (arch, keys, vocab) in MODELS.items():
        _gguf(out / f"{model}.gguf", arch, keys, vocab)
        layers = keys["block_count"]
        for label, ctx, ub, seqs, tk, tv, fa, ngl, unified in SETTINGS:
            gpu_layers = layers // 2 if ngl == 0 else 999
            fa_flag = {"on": 1, "off": 0, "auto": -1}[fa]
            rows.append(
                [
                    f"{model} {label}",
                    str(out / f"{model}.gguf"),
                    ctx,
                    max(2048, ub),
                    ub,
                    seqs,
                    tk,
                    tv,
                    fa_flag,
                    gpu_layers,
                    int(unified),
                    0,
                ]
            )
    for model, (arch, keys, vocab) in MODELS.items():
        path = out / f"{model}-q4_k.gguf"
        _gguf(path, arch, keys, vocab, typed=model)
        layers = keys["block_count"]
        moe = "expert_count" in keys
        for label, ctx, ub, ngl, cpu in TYPED:
            if cpu and not moe:
                continue
            gpu_layers = layers // 2 if ngl == 0 else 999
            row = [f"{model} {label}", str(path), ctx, max(2048, ub), ub, 1, "f16", "f16", 1]
            rows.append([*row, gpu_layers, 0, 0, *([cpu] if cpu else [])])
    with (out / "cases.tsv").open("w") as f:
        for row in rows:
            f.write("\t".join(str(v) for v in row) + "\n")
    print(f"{len(rows)} cases in {out / 'cases.tsv'}")


def _settings(label: str) -> tuple[Any, ...]:
    return next(s for s in SETTINGS if s[0] == label)


def claim(model: str, label: str, header: GgufInfo) -> LlamaClaim:
    layers = MODELS[model][1]["block_count"]
    typed = next((t for t in TYPED if t[0] == label), None)
    if typed is not None:
        _, ctx, ub, ngl, cpu = typed
        return LlamaClaim(
            "m",
            (0,),
            header,
            ctx_size=ctx,
            flash_attn="on",
            n_ubatch=ub,
            gpu_layers=str(layers // 2) if ngl == 0 else "all",
            cpu_moe_layers=-1 if cpu else 0,
        )
    _, ctx, ub, seqs, tk, tv, fa, ngl, unified = _settings(label)
    return LlamaClaim(
        "m",
        (0,),
        header,
        ctx_size=ctx,
        parallel=seqs,
        cache_type_k=tk,
        cache_type_v=tv,
        flash_attn=fa,
        n_ubatch=ub,
        kv_unified=unified,
        gpu_layers=str(layers // 2) if ngl == 0 else "all",
    )


def measured(results: Path) -> tuple[dict[str, dict[str, tuple[int, int, int]]], list[str]]:
    """Per case, (context, compute, model) bytes per buffer type; and the cases llama.cpp
    refused."""
    found: dict[str, dict[str, tuple[int, int, int]]] = {}
    refused = []
    with results.open(newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            if row["buffer"] == "ERROR":
                refused.append(row["case"])
                continue
            found.setdefault(row["case"], {})[row["buffer"]] = (
                int(row["context"]),
                int(row["compute"]),
                int(row["model"]),
            )
    return found, refused


def pairs(results: Path, headers: Path | None = None) -> list[tuple[str, str, float, float]]:
    """(case, "context", "compute" or "weights", estimate MiB, llama.cpp's MiB) for every
    measured case: what the budget counts on the GPU (its share of weights, KV and state under
    -ngl and with weights kept in RAM) against the CUDA device's buffers, or against the CPU
    backend's for a CPU run; weights only for the Q4_K-typed headers."""
    out = []
    for case, buffers in measured(results)[0].items():
        model = next(m for m in MODELS if case.startswith(m + " "))
        label = case[len(model) + 1 :]
        typed = label.startswith("q4_k ")
        path = (headers or Path(".")) / f"{model}{'-q4_k' if typed else ''}.gguf"
        if headers is None or not path.exists():
            path = _header_file(model, typed)
        with path.open("rb") as stream:
            header = summary(stream)
        assert header is not None, path
        device = {k: v for k, v in buffers.items() if k.startswith("CUDA") and "Host" not in k}
        asked = claim(model, label, header)
        share = llama_share(asked, 1) if device else llama_memory(asked, header)
        assert isinstance(share, (LlamaShare, LlamaMemory)), (case, share)
        real = device or buffers
        out.append(
            (case, "context", share.kv_mib + share.rs_mib, sum(v[0] for v in real.values()) / MiB)
        )
        out.append((case, "compute", share.compute_mib, sum(v[1] for v in real.values()) / MiB))
        if typed and device and isinstance(share, LlamaShare):  # F32 weights say nothing here
            out.append(
                (case, "weights", share.weights_mib, sum(v[2] for v in device.values()) / MiB)
            )
    return out


def compare(results: Path, headers: Path | None = None) -> None:
    for case in measured(results)[1]:
        print(f"{case}: llama.cpp refused it")
    ratios: dict[str, list[float]] = {"context": [], "compute": [], "weights": []}
    print(f"{'case':48} {'what':8} {'estimate':>10} {'llama.cpp':>10} {'ratio':>6}  MiB")
    for case, what, est, real in pairs(results, headers):
        ratio = est / real if real else float("nan")
        if real:
            ratios[what].append(ratio)
        print(f"{case:48} {what:8} {est:10.2f} {real:10.2f} {ratio:6.3f}")
    for what, values in ratios.items():
        if values:
            within = sum(abs(r - 1) <= 0.05 for r in values)
            print(
                f"{what}: median ratio {statistics.median(values):.3f}, "
                f"{within} of {len(values)} within 5%, worst {min(values):.3f} / {max(values):.3f}"
            )


_HEADERS = tempfile.TemporaryDirectory(prefix="vram-dry-run-")


@functools.cache
def _header_file(model: str, typed: bool = False) -> Path:
    """The model's header, written once per process (a sparse file, removed at exit)."""
    arch, keys, vocab = MODELS[model]
    path = Path(_HEADERS.name) / f"{model}{'-q4_k' if typed else ''}.gguf"
    _gguf(path, arch, keys, vocab, typed=model if typed else "")
    return path


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "write":
        write(Path(argv[1]))
        return 0
    if len(argv) >= 2 and argv[0] == "compare":
        compare(Path(argv[1]), Path(argv[2]) if len(argv) > 2 else None)
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
