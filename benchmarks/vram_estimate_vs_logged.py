"""provision.vram's estimate against what llama.cpp logged or users measured, per case.

Run: .venv/bin/python -m benchmarks.vram_estimate_vs_logged
Logged cases come from tests/fixtures/corpus/vram/ (KV / RS / compute lines); seed cases from
../shared/seeds/ (000: Qwen3.5-35B-A3B UD-Q5_K_XL, 24.6 GB file, 262144 ctx q8_0 on an
RTX 5090, 31.8 GB used; the dense 27B Q6_K_XL, 25.7 GB, q4_0 KV at 128K, 29.2 GB used) and 001
(the same A3B model, UD-Q4_K_XL, 19 GB file, on an RTX 5090: VRAM growth as the prompt grows).
Hyperparameters not printed in a log are the models' published configs (marked "config").
"""

from __future__ import annotations

from typing import Any

from checks.services.gguf_header import GgufInfo
from provision.vram import CUDA_CONTEXT_MIB, LlamaClaim, LlamaMemory, llama_memory

GB = 1e9 / 2**20  # MiB per GB


def _info(
    arch: str,
    layers: int,
    embd: int,
    heads: int,
    kv: int,
    head_dim: int,
    v_dim: int = 0,
    **extra: int,
) -> GgufInfo:
    """A header; ``v_dim`` is the value length where it differs from the key length."""
    v_len = v_dim or head_dim
    fields = (3, arch, layers, 262144, embd, heads, kv, head_dim, v_len, 0, 0, None, None)
    return GgufInfo(*fields, **extra)  # type: ignore[arg-type]


QWEN35_SSM = dict(
    full_attention_interval=4, ssm_conv_kernel=4, ssm_state_size=128, ssm_group_count=16
)
CASES = [
    # name, model, claim settings, weights MiB, logged (kv, rs, compute, total) MiB
    (
        "qwen3vl-8b 16k q8_0 (lmstudio#1176)",
        _info("qwen3vl", 36, 4096, 32, 8, 128, vocab_size=151936),
        dict(ctx_size=16384, cache_type_k="q8_0", cache_type_v="q8_0"),
        None,
        (1224.00, 0.0, 352.77, None),
    ),
    (
        "qwen3.5-9b rs 1 seq (llama-cpp-python#78)",
        _info("qwen35", 32, 4096, 16, 4, 256, ssm_inner_size=4096, **QWEN35_SSM),
        dict(ctx_size=4096),
        None,
        (None, 50.25, None, None),
    ),
    (
        "qwen2.5-coder-32b 32k q8_0, CUDA1 of 2, pipeline parallel (#11200, config)",
        _info("qwen2", 64, 5120, 40, 8, 128, vocab_size=152064),
        dict(ctx_size=32768, cache_type_k="q8_0", cache_type_v="q8_0", n_ubatch=256, n_gpus=2),
        None,
        (4352.00, 0.0, 237.51, None),
    ),
    (
        "llama-3.1-70b 4k no-FA, RPC CPU device (arm-learning-paths)",
        _info("llama", 80, 8192, 64, 8, 128, vocab_size=128256),
        dict(ctx_size=4096, flash_attn="off"),
        None,
        (1280.00, 0.0, 588.01, None),
    ),
    (
        "phi-3-mini 4k ub256 no-FA, CUDA0 (tgwebui log)",
        _info("phi3", 32, 3072, 32, 32, 96, vocab_size=32064),
        dict(ctx_size=4096, flash_attn="off", n_ubatch=256),
        None,
        (1536.00, 0.0, 150.00, None),
    ),
    (
        "gpt-oss-20b iswa 131k ub2048, Metal (M5 log)",
        _info("gpt-oss", 24, 2880, 64, 8, 64, vocab_size=201088, sliding_window=128),
        dict(ctx_size=131072, n_ubatch=2048),
        None,
        (3126.00, 0.0, 1672.08, None),
    ),
    (
        "gemma-2-2b iswa 8k 4 slots unified, CPU (llama-server log)",
        _info("gemma2", 26, 2304, 8, 4, 256, vocab_size=256000, sliding_window=4096),
        dict(ctx_size=8192, parallel=4, kv_unified=True),
        None,
        (832.00, 0.0, 509.00, None),
    ),
    (
        "qwen3.5-0.8b 262k 4 slots unified, CPU (llama-server log)",
        _info("qwen35", 24, 1024, 8, 2, 256, ssm_inner_size=2048, vocab_size=248320, **QWEN35_SSM),
        dict(ctx_size=262144, parallel=4, kv_unified=True),
        None,
        (3072.00, 77.06, 786.02, None),
    ),
    (
        "pythia-2.8b 2k no-FA, CUDA0 V100 (ggml-org/ci)",
        _info("gptneox", 32, 2560, 32, 32, 80, vocab_size=50304),
        dict(ctx_size=2048, flash_attn="off"),
        None,
        (640.00, 0.0, 162.00, None),
    ),
    (
        "pythia-2.8b 2k FA, CUDA0 V100 (ggml-org/ci)",
        _info("gptneox", 32, 2560, 32, 32, 80, vocab_size=50304),
        dict(ctx_size=2048),
        None,
        (640.00, 0.0, 103.25, None),
    ),
    (
        "pythia-2.8b 2k no-FA -ngl 10/33, CUDA0 V100 (ggml-org/ci; KV = all layers)",
        _info("gptneox", 32, 2560, 32, 32, 80, vocab_size=50304),
        dict(ctx_size=2048, flash_attn="off", gpu_layers="10"),
        None,
        (640.00, 0.0, 203.99, None),
    ),
    (
        "pythia-1.4b 2k no-FA, CPU (ggml-org/ci)",
        _info("gptneox", 24, 2048, 16, 16, 128, vocab_size=50304),
        dict(ctx_size=2048, flash_attn="off"),
        None,
        (384.00, 0.0, 102.25, None),
    ),
    (
        "pythia-1.4b 128 ub128 no-FA, CPU (ggml-org/ci; b4343 did not pad 128 to 256)",
        _info("gptneox", 24, 2048, 16, 16, 128, vocab_size=50304),
        dict(ctx_size=128, flash_attn="off", n_ubatch=128),
        None,
        (24.00, 0.0, 25.56, None),
    ),
    (
        "qwen2.5-coder-32b 32k q8_0, CUDA0 of 2, pipeline parallel (#11200, config)",
        _info("qwen2", 64, 5120, 40, 8, 128, vocab_size=152064),
        dict(ctx_size=32768, cache_type_k="q8_0", cache_type_v="q8_0", n_ubatch=256, n_gpus=2),
        None,
        (4352.00, 0.0, 233.00, None),
    ),
    (
        "deepseek-r1-671b 8k 4 seqs no-FA, ROCm0 of 8, pipeline parallel (Setonix notes, config)",
        _info("deepseek2", 61, 7168, 128, 128, 192, 128, vocab_size=129280, kv_lora_rank=512),
        dict(ctx_size=8192, parallel=4, kv_unified=True, flash_attn="off", n_gpus=8),
        None,
        (39040.00, 0.0, 2322.01, None),
    ),
    (
        "command-r-35b 4k no-FA, CUDA0 of 2, pipeline parallel (#6122, config)",
        _info("command-r", 40, 8192, 64, 64, 128, vocab_size=256000),
        dict(ctx_size=4096, flash_attn="off", n_gpus=2),
        None,
        (5120.00, 0.0, 672.01, None),
    ),
    (
        "seed 000 qwen3.5-35b-a3b 262k q8_0 (config)",
        _info(
            "qwen35moe", 40, 2048, 16, 2, 256, ssm_inner_size=4096, vocab_size=248320, **QWEN35_SSM
        ),
        dict(
            ctx_size=262144, parallel=4, kv_unified=True, cache_type_k="q8_0", cache_type_v="q8_0"
        ),
        24.6 * GB,
        (None, None, None, 31.8 * GB),
    ),
    (
        "seed 000 qwen3.5-27b 128k q4_0 (config)",
        _info("qwen35", 64, 5120, 24, 4, 256, ssm_inner_size=6144, vocab_size=248320, **QWEN35_SSM),
        dict(
            ctx_size=131072, parallel=4, kv_unified=True, cache_type_k="q4_0", cache_type_v="q4_0"
        ),
        25.7 * GB,
        (None, None, None, 29.2 * GB),
    ),
]


A3B = _info("qwen35moe", 40, 2048, 16, 2, 256, ssm_inner_size=4096, vocab_size=248320, **QWEN35_SSM)
SEED_001_UNIT = dict(
    ctx_size=131072, parallel=4, cache_type_k="q4_0", cache_type_v="q8_0", flash_attn="on"
)
"""Seed 001's systemd unit: -c 131072 -np 4 --flash-attn on -ctk q4_0 -ctv q8_0, 19 GB file."""
SEED_001_GROWTH = [(9_000, 0), (53_000, 88), (107_000, 192), (178_000, 330)]
"""Seed 001's context table: prompt tokens and the VRAM growth measured beside them (MB, over
the 9K row). Its run reached 178K tokens in one request, beyond the unit's 32768 per slot, so
the table was measured under another --ctx-size, which the seed does not give."""


def _ratio(estimate: float, logged: float | None) -> str:
    if logged is None:
        return "-"
    ratio = f"{estimate / logged:5.3f}" if logged else "-"
    return f"{estimate:9.2f} / {logged:9.2f} = {ratio}"


def main() -> None:
    for name, model, settings, weights, (kv, rs, compute, total) in CASES:
        claim_settings: dict[str, Any] = dict(settings)  # type: ignore[call-overload]
        n_gpus = int(claim_settings.pop("n_gpus", 1))
        claim = LlamaClaim("m", (0,), model, **claim_settings)
        memory = llama_memory(claim, model, n_gpus)
        if not isinstance(memory, LlamaMemory):
            print(f"{name}: unknown ({memory})")
            continue
        print(name)
        print(f"  kv      {_ratio(memory.kv_mib, kv)}")
        print(f"  rs      {_ratio(memory.rs_mib, rs)}")
        print(f"  compute {_ratio(memory.compute_mib, compute)}")
        if weights is not None:
            whole = weights + memory.kv_mib + memory.rs_mib + memory.compute_mib + CUDA_CONTEXT_MIB
            print(f"  total   {_ratio(whole, total)}  (weights = file size)")
    _seed_001()


def _seed_001() -> None:
    """The estimate beside seed 001's growth table: llama.cpp allocates KV, recurrent state and
    compute buffers at load for the whole --ctx-size, so the estimate grows by 0 as a prompt
    fills the cache; the KV of the cells a prompt uses is shown beside it for scale."""
    unit = llama_memory(LlamaClaim("m", (0,), A3B, **SEED_001_UNIT), A3B)  # type: ignore[arg-type]
    if not isinstance(unit, LlamaMemory):
        print(f"seed 001: unknown ({unit})")
        return
    whole = 19 * GB + unit.kv_mib + unit.rs_mib + unit.compute_mib + CUDA_CONTEXT_MIB
    print("seed 001 qwen3.5-35b-a3b UD-Q4_K_XL, unit -c 131072 -np 4 q4_0/q8_0 (config)")
    print(
        f"  at load: kv {unit.kv_mib:.2f} rs {unit.rs_mib:.2f} compute {unit.compute_mib:.2f}"
        f" total {whole:.0f} MiB (weights = file size; no measured total in the seed)"
    )
    settings = dict(SEED_001_UNIT, parallel=1)
    base = _kv_of(settings, SEED_001_GROWTH[0][0])
    for tokens, grown in SEED_001_GROWTH:
        used = _kv_of(settings, tokens) - base
        print(
            f"  {tokens:>7} tokens  measured +{grown:>3} MB  estimate +0 MiB (reserved at load)"
            f"  [KV of those cells: +{used:.0f} MiB]"
        )


def _kv_of(settings: dict[str, object], tokens: int) -> float:
    claim = LlamaClaim("m", (0,), A3B, **dict(settings, ctx_size=tokens))  # type: ignore[arg-type]
    memory = llama_memory(claim, A3B)
    return memory.kv_mib if isinstance(memory, LlamaMemory) else float("nan")


if __name__ == "__main__":
    main()
