"""provision.vram's estimate against what llama.cpp logged or users measured, per case.

Run: .venv/bin/python -m benchmarks.vram_estimate_vs_logged
Logged cases come from tests/fixtures/corpus/vram/ (KV / RS / compute lines), each with the
llama.cpp build it ran (printed, or dated before b9410 by the log). Seed cases come from
../shared/seeds/: 000, Qwen3.5-35B-A3B UD-Q5_K_XL ("24.6GB on disk") at 262144 ctx q8_0 on an
RTX 5090 with llama.cpp b8580 ("VRAM: 31.8GB used, 0.8GB headroom"), and the dense 27B Q6_K_XL
("25.7GB") with q4_0 KV at 128K ("29.2GB used"); 001, the same A3B model, UD-Q4_K_XL, on an RTX
5090: VRAM growth as a prompt grows. Hyperparameters not printed in a log are the models'
published configs (marked "config").

Seed 000 cannot be a 5% check. Its "GB" are the MiB figures nvidia-smi and Rookery print, over
1000: 31.8 used + 0.8 headroom is the RTX 5090's 32607 MiB (noonghunna/club-3090#1229 prints
"32607MiB"), where GiB would leave 0.04 and GB 2.4 of headroom. Rookery (lance0/rookery, the
daemon the seed runs: crates/rookery-core/src/config.rs, resolve_llama_server_command_line, with
the same flags since its first commit 60b739a) starts llama-server with --parallel 1,
--ubatch-size 1024 (its default), -fa on and -ngl 99, and names a HuggingFace model with -hf.
Under those flags b8580 holds the F32 mask beside its F16 cast (provision.vram.F16_MASK_BUILD:
+1024 MiB at 262144 cells and 1024 tokens) and, once a prompt fills the cache, 512 MiB of F16
K/V copies in CUDA's pool (KV_SCRATCH_BUILD). What the seed leaves open spans more than 5%:
whether "24.6GB" is GB or GiB (Rookery's quant browser prints GiB as "GB"; 1730 MiB apart);
whether -hf loaded the mmproj, as llama-server does unless --no-mmproj (common/arg.cpp;
unslothai/unsloth#4310 for this repository), onto the GPU by default (--mmproj-offload): a user's
inventory of the repository lists mmproj-F16.gguf at 0.9 GiB, and a CLIP compute buffer of
248.10 MiB goes with the same 27-layer, 1152-wide vision tower (ollama/ollama#17482); whether
the figure counts the driver's reserved memory (NVML's v1 nvmlMemory_t "used" does, nvidia-smi's
does not; Cldfire/nvml-wrapper#57: 912 MB against 7.8 MB on an idle A100); and what else held
the GPU. The weights are the whole file, token_embd included, which llama.cpp keeps in RAM.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from checks.services.gguf_header import GgufInfo
from provision.vram import (
    CUDA_CONTEXT_MIB,
    F16_MASK_BUILD,
    LlamaClaim,
    LlamaMemory,
    clip_compute_mib,
    llama_memory,
)

GB = 1e9 / 2**20  # MiB per GB
BEFORE_F16_MASK = F16_MASK_BUILD - 1  # a log dated before b9410 that prints no build number


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
Q8_32K = dict(ctx_size=32768, cache_type_k="q8_0", cache_type_v="q8_0", n_ubatch=256)
CASES = [
    # name, model, claim settings, logged (kv, rs, compute) MiB
    (
        "qwen3vl-8b 16k q8_0 (lmstudio#1176)",
        _info("qwen3vl", 36, 4096, 32, 8, 128, vocab_size=151936),
        dict(ctx_size=16384, cache_type_k="q8_0", cache_type_v="q8_0", build=BEFORE_F16_MASK),
        (1224.00, 0.0, 352.77),
    ),
    (
        "qwen3.5-9b rs 1 seq (llama-cpp-python#78)",
        _info("qwen35", 32, 4096, 16, 4, 256, ssm_inner_size=4096, **QWEN35_SSM),
        dict(ctx_size=4096),
        (None, 50.25, None),
    ),
    (
        "qwen2.5-coder-32b 32k q8_0, CUDA1 of 2, pipeline parallel (#11200, config)",
        _info("qwen2", 64, 5120, 40, 8, 128, vocab_size=152064),
        dict(Q8_32K, n_gpus=2, build=4462),
        (4352.00, 0.0, 237.51),
    ),
    (
        "llama-3.1-70b 4k no-FA, RPC CPU device (arm-learning-paths)",
        _info("llama", 80, 8192, 64, 8, 128, vocab_size=128256),
        dict(ctx_size=4096, flash_attn="off"),
        (1280.00, 0.0, 588.01),
    ),
    (
        "phi-3-mini 4k ub256 no-FA, CUDA0 (tgwebui log)",
        _info("phi3", 32, 3072, 32, 32, 96, vocab_size=32064),
        dict(ctx_size=4096, flash_attn="off", n_ubatch=256),
        (1536.00, 0.0, 150.00),
    ),
    (
        "gpt-oss-20b iswa 131k ub2048, Metal (M5 log)",
        _info("gpt-oss", 24, 2880, 64, 8, 64, vocab_size=201088, sliding_window=128),
        dict(ctx_size=131072, n_ubatch=2048, build=BEFORE_F16_MASK),
        (3126.00, 0.0, 1672.08),
    ),
    (
        "gemma-2-2b iswa 8k 4 slots unified, CPU (llama-server log)",
        _info("gemma2", 26, 2304, 8, 4, 256, vocab_size=256000, sliding_window=4096),
        dict(ctx_size=8192, parallel=4, kv_unified=True, build=BEFORE_F16_MASK),
        (832.00, 0.0, 509.00),
    ),
    (
        "qwen3.5-0.8b 262k 4 slots unified, CPU (llama-server log)",
        _info("qwen35", 24, 1024, 8, 2, 256, ssm_inner_size=2048, vocab_size=248320, **QWEN35_SSM),
        dict(ctx_size=262144, parallel=4, kv_unified=True, build=BEFORE_F16_MASK),
        (3072.00, 77.06, 786.02),
    ),
    (
        "pythia-2.8b 2k no-FA, CUDA0 V100 (ggml-org/ci)",
        _info("gptneox", 32, 2560, 32, 32, 80, vocab_size=50304),
        dict(ctx_size=2048, flash_attn="off", build=4343),
        (640.00, 0.0, 162.00),
    ),
    (
        "pythia-2.8b 2k FA, CUDA0 V100 (ggml-org/ci)",
        _info("gptneox", 32, 2560, 32, 32, 80, vocab_size=50304),
        dict(ctx_size=2048, build=4343),
        (640.00, 0.0, 103.25),
    ),
    (
        "pythia-2.8b 2k no-FA -ngl 10/33, CUDA0 V100 (ggml-org/ci; KV = all layers)",
        _info("gptneox", 32, 2560, 32, 32, 80, vocab_size=50304),
        dict(ctx_size=2048, flash_attn="off", gpu_layers="10", build=4343),
        (640.00, 0.0, 203.99),
    ),
    (
        "pythia-1.4b 2k no-FA, CPU (ggml-org/ci)",
        _info("gptneox", 24, 2048, 16, 16, 128, vocab_size=50304),
        dict(ctx_size=2048, flash_attn="off", build=4343),
        (384.00, 0.0, 102.25),
    ),
    (
        "pythia-1.4b 128 ub128 no-FA, CPU (ggml-org/ci; b4343 did not pad 128 to 256)",
        _info("gptneox", 24, 2048, 16, 16, 128, vocab_size=50304),
        dict(ctx_size=128, flash_attn="off", n_ubatch=128, build=4343),
        (24.00, 0.0, 25.56),
    ),
    (
        "qwen2.5-coder-32b 32k q8_0, CUDA0 of 2, pipeline parallel (#11200, config)",
        _info("qwen2", 64, 5120, 40, 8, 128, vocab_size=152064),
        dict(Q8_32K, n_gpus=2, build=4462),
        (4352.00, 0.0, 233.00),
    ),
    (
        "deepseek-r1-671b 8k 4 seqs no-FA, ROCm0 of 8, pipeline parallel (Setonix notes, config)",
        _info("deepseek2", 61, 7168, 128, 128, 192, 128, vocab_size=129280, kv_lora_rank=512),
        dict(ctx_size=8192, parallel=4, kv_unified=True, flash_attn="off", n_gpus=8),
        (39040.00, 0.0, 2322.01),
    ),
    (
        "command-r-35b 4k no-FA, CUDA0 of 2, pipeline parallel (#6122, config)",
        _info("command-r", 40, 8192, 64, 64, 128, vocab_size=256000),
        dict(ctx_size=4096, flash_attn="off", n_gpus=2),
        (5120.00, 0.0, 672.01),
    ),
]


A3B = _info("qwen35moe", 40, 2048, 16, 2, 256, ssm_inner_size=4096, vocab_size=248320, **QWEN35_SSM)
DENSE_27B = _info(
    "qwen35", 64, 5120, 24, 4, 256, ssm_inner_size=6144, vocab_size=248320, **QWEN35_SSM
)
ROOKERY = dict(parallel=1, n_ubatch=1024, flash_attn="on", build=8580)
"""Rookery's llama-server command line (--parallel 1 --ubatch-size 1024 -fa on) and seed 000's
llama.cpp b8580."""
SEED_000 = [
    # name, model, settings, the file's size as the seed gives it, MiB used (its "GB" x 1000)
    (
        "qwen3.5-35b-a3b UD-Q5_K_XL 262k q8_0",
        A3B,
        dict(ROOKERY, ctx_size=262144, cache_type_k="q8_0", cache_type_v="q8_0"),
        24.6,
        31800,
    ),
    (
        "qwen3.5-27b Q6_K_XL 128k q4_0",
        DENSE_27B,
        dict(ROOKERY, ctx_size=131072, cache_type_k="q4_0", cache_type_v="q4_0"),
        25.7,
        29200,
    ),
]
SEED_001_UNIT = dict(
    ctx_size=131072,
    parallel=4,
    cache_type_k="q4_0",
    cache_type_v="q8_0",
    flash_attn="on",
    build=BEFORE_F16_MASK,
)
"""Seed 001's systemd unit: -c 131072 -np 4 --flash-attn on -ctk q4_0 -ctv q8_0, 19 GB file;
a build of before 2026-04-06, the gist's date (b9410 is of 2026-05-29)."""
SEED_001_GROWTH = [(9_000, 0), (53_000, 88), (107_000, 192), (178_000, 330)]
"""Seed 001's context table: prompt tokens and the VRAM growth measured beside them (MB, over
the 9K row). Its run reached 178K tokens in one request, beyond the unit's 32768 per slot, so
the table was measured under another --ctx-size, which the seed does not give."""


def _clip(
    kind: str,
    embd: int,
    ff: int,
    image: int,
    patch: int,
    merge: int = 0,
    proj: int = 0,
    deep: int = 0,
) -> GgufInfo:
    """A projector's header: 16 heads, the vision tower's sizes, its merge, the projection_dim
    and number of its deepstack mergers (0: none given)."""
    fields = (3, "clip", None, None, None, None, None, None, None, 0, 0, None, None)
    header = GgufInfo(*fields)
    return replace(
        header,
        projector_type=kind,
        vision_embedding_length=embd,
        vision_feed_forward_length=ff,
        vision_head_count=16,
        vision_image_size=image,
        vision_patch_size=patch,
        vision_merge=merge or None,
        vision_projection_dim=proj or None,
        vision_deepstack_layers=deep,
    )


GEMMA3_CLIP = _clip("gemma3", 1152, 4304, 896, 14)
QWEN2VL_CLIP = _clip("qwen2vl_merger", 1280, 5120, 560, 14, merge=2)
CLIP_CASES = [
    # name, projector header, flash attention, logged CLIP compute buffer (MiB)
    ("gemma-3 mmproj FA, CUDA0 (#22790)", GEMMA3_CLIP, True, 121.25),
    ("gemma-3 mmproj no-FA, ROCm0 (gguf-parser-go#44 table)", GEMMA3_CLIP, False, 1132.0),
    (
        "qwen3.5-4b mmproj FA, CUDA0 (PR #22673)",
        _clip("qwen3vl_merger", 1024, 4096, 768, 16, merge=2, proj=2560),
        True,
        223.30,
    ),
    (
        "qwen3-vl-8b mmproj FA, CUDA0, OOM (#18181; 3 deepstack mergers, config)",
        _clip("qwen3vl_merger", 1152, 4304, 768, 16, merge=2, proj=4096, deep=3),
        True,
        372.08,
    ),
    ("qwen2-vl mmproj no-FA, ROCm0 (gguf-parser-go#44 table, config)", QWEN2VL_CLIP, False, 4598.0),
    ("qwen2-vl mmproj FA, ROCm0 (gguf-parser-go#44 table, config)", QWEN2VL_CLIP, True, 267.0),
]


def _ratio(estimate: float, logged: float | None) -> str:
    if logged is None:
        return "-"
    ratio = f"{estimate / logged:5.3f}" if logged else "-"
    return f"{estimate:9.2f} / {logged:9.2f} = {ratio}"


def main() -> None:
    for name, model, settings, (kv, rs, compute) in CASES:
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
    for name, header, flash, logged in CLIP_CASES:
        estimate = clip_compute_mib(header, flash)
        shown = _ratio(estimate, logged) if isinstance(estimate, float) else estimate
        print(f"{name}\n  clip compute {shown}")
    _seed_000()
    _seed_001()


def _seed_000() -> None:
    """Seed 000's totals under Rookery's command line, with the file's size read as GB and as
    GiB; the weights are the whole file (its token_embd stays in RAM, of a type the seed does
    not give), and an mmproj -hf may have loaded is not counted (see the module docstring)."""
    for name, model, settings, size, used in SEED_000:
        memory = llama_memory(LlamaClaim("m", (0,), model, **settings), model)  # type: ignore[arg-type]
        if not isinstance(memory, LlamaMemory):
            print(f"seed 000 {name}: unknown ({memory})")
            continue
        beside = memory.kv_mib + memory.rs_mib + memory.compute_mib + memory.pool_mib
        print(f"seed 000 {name} (config; Rookery's command line, b8580)")
        print(
            f"  kv {memory.kv_mib:.2f} rs {memory.rs_mib:.2f} compute {memory.compute_mib:.2f}"
            f" CUDA pool {memory.pool_mib:.2f} CUDA context {CUDA_CONTEXT_MIB}"
        )
        for unit, mib in (("GB", size * GB), ("GiB", size * 1024)):
            whole = mib + beside + CUDA_CONTEXT_MIB
            print(f"  total, file in {unit:<3} {_ratio(whole, used)}")


def _seed_001() -> None:
    """The estimate beside seed 001's growth table. KV, recurrent state and compute buffers are
    allocated at load for the whole --ctx-size; what grows is CUDA's pool, from which builds
    before b9489 take flash attention's F16 copies of a quantized cache, sized by the cells in
    use (provision.vram.KV_SCRATCH_BUILD): 2 KiB per cell here (one layer's K and V, 2 heads of
    256, in F16). The pool of a one-slot context of that many tokens is shown beside each row."""
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
    base = _pool_of(settings, SEED_001_GROWTH[0][0])
    for tokens, grown in SEED_001_GROWTH:
        grew = _pool_of(settings, tokens) - base
        print(f"  {tokens:>7} tokens  measured +{grown:>3} MB  CUDA pool +{grew:.0f} MiB")


def _pool_of(settings: dict[str, object], tokens: int) -> float:
    claim = LlamaClaim("m", (0,), A3B, **dict(settings, ctx_size=tokens))  # type: ignore[arg-type]
    memory = llama_memory(claim, A3B)
    return memory.pool_mib if isinstance(memory, LlamaMemory) else float("nan")


if __name__ == "__main__":
    main()
