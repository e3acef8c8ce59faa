"""The GPU memory each service of a host will hold, per GPU, and whether the plan fits.

vLLM reserves ``gpu_memory_utilization x total`` on every GPU it uses, and refuses to start when
less than that is free ("Free memory on device ... on startup is less than desired GPU memory
utilization", pytorch/pytorch#175666). llama-server holds its weights (the GGUF tensors), the KV
cache and recurrent state it allocates for the context (`llama_memory`), its compute buffers and
a CUDA context on each GPU it uses. Pure: the inputs are plain data and nothing is probed here.

The KV/state model follows llama.cpp (src/llama-context.cpp, llama-kv-cache.cpp,
llama-kv-cache-iswa.cpp, llama-memory-recurrent.cpp, llama-hparams.cpp, llama-model.cpp):

- n_ctx is padded to 256 cells; it is the total over the --parallel slots. A unified cache holds
  n_ctx cells in one stream; otherwise each slot gets n_ctx / slots (padded to 256) cells.
- Each layer with attention holds ``cells x row(type, head_count_kv(il) x key/value_length)``
  for K and for V, where row() counts whole quantization blocks. Layers whose head_count_kv is 0
  and the recurrent layers of hybrid models hold none.
- Sliding-window layers (the per-architecture pattern, or the header's per-layer pattern) hold
  ``pad(min(cells, n_swa x (slots if unified else 1) + n_ubatch), 256)`` cells per stream,
  unless --swa-full.
- Recurrent layers hold f32 state for max(1, slots) cells: conv state
  ``(d_conv - 1) x (d_inner + 2 x n_group x d_state)`` (LFM2: ``n_embd x (l_cache - 1)``) and
  ssm state ``d_state x d_inner``.
- MLA models (DeepSeek-2/3 style headers: one KV head of kv_lora_rank + rope dims) are counted
  from the header's K and V lengths; newer llama.cpp builds allocate no V for them, so this
  over-counts them by the V part.

Compute buffers follow current builds; a claim that names an older build (its --version) gets
that build's flash-attention mask (F16_MASK_BUILD) and F16 cache copies (KV_SCRATCH_BUILD).

Beside its model, llama-server may load a multimodal projector (--mmproj, or the one -hf
downloads) onto the first GPU, its weights and CLIP compute buffer (mmproj_part), and a draft
model for speculative decoding (-md) with weights, KV cache and compute buffers of its own
(draft_part). Each is its own Part of the budget; what of them cannot be read is not counted and
says so, never a silent 0.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from checks.facts.model import Gpu, LlamaServer
from checks.services.gguf_header import GGML_TYPES, TYPE_IDS, GgufInfo

MIB = 1024 * 1024
CUDA_CONTEXT_MIB = 555
"""The CUDA context of one process on one GPU: the largest llama.cpp measured, 107 MiB
(RTX 4060 Ti) to 555 MiB (RTX PRO 6000) (ggml-org/llama.cpp#23604)."""
COMPUTE_FALLBACK_MIB = 1617
"""Compute buffers of one GPU when the header lacks the vocabulary or embedding size: the
largest flash-attention compute buffer in the memory breakdowns cited below (RTX 3090,
ggml-org/llama.cpp#24608). Breakdowns show 1164 MiB (RTX PRO 6000, ggml-org/llama.cpp#27953)
and 1292 MiB (RTX 3090, ollama/ollama#16031)."""
LIVE_ACTIVATIONS = 3
"""f32 activations of n_embd per token that stay live beside the attention of one layer (its
input, its norm and the attention output), and of which 2 stay live beside the logits. Checked
against logged compute buffers: benchmarks/vram_estimate_vs_logged.py."""
LLAMA_OVERHEAD_MIB = CUDA_CONTEXT_MIB + COMPUTE_FALLBACK_MIB
"""What a llama-server holds on a GPU beside weights and KV when nothing else is known."""
N_UBATCH = 512  # llama.cpp's default --ubatch-size
KV_PAD = 256  # llama-context.cpp pads n_ctx, and llama-kv-cache-iswa.cpp the SWA cache, to 256
KV_CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
SWA_PATTERNS = {"gemma2": 2, "gemma3": 6, "cohere2": 4, "gpt-oss": 2}
"""Architectures whose sliding-window layers llama.cpp sets by pattern (set_swa_pattern): of
every n layers, all but the last slide."""
INTERVAL_HYBRIDS = {"qwen3next": 4, "qwen35": 4, "qwen35moe": 4}
"""Hybrids whose every full_attention_interval-th layer has attention (default interval) and
the rest are recurrent (Gated DeltaNet)."""
LAYER_HYBRIDS = ("jamba", "granitehybrid", "nemotron_h", "nemotron_h_moe", "lfm2", "lfm2moe")
"""Hybrids whose per-layer head_count_kv marks recurrent layers with 0 (Nemotron-H: and a
feed_forward_length of 0; its MLP layers are neither)."""
RECURRENT = ("mamba", "mamba2")
FLASH_OFF = ("off", "0", "false", "disabled", "no")
F16_MASK_BUILD = 9410
"""The first llama.cpp build whose flash attention reads a KQ mask made in F16 (b9410,
ggml-org/llama.cpp#23764). Before it the mask input was F32 and cast to F16 once per graph
(src/llama-graph.cpp, build_attn_inp_kv: ggml_cast), and the F32 mask (or its copy on a GPU) and
the F16 cast are held at once: 6 bytes per cell and token (the qwen3.5-0.8b CPU log of
tests/test_vram_logged.py; benchmarks/vram_probe on llama.cpp c0159f9 of March 2026 reserves the
same 786.02 MiB for its header)."""
KV_SCRATCH_BUILD = 9489
"""The first llama.cpp build that reserves CUDA flash attention's F16 copies of a quantized K/V
cache in its compute buffer (b9489, ggml-org/llama.cpp#23907). Before it they came from CUDA's
memory pool (ggml-cuda/fattn-common.cuh: K_f16.alloc(ggml_nelements(K)), sized by the cells in
use), which keeps what it grew to: the same bytes, held once a prompt has filled the cache."""
SCHED_MAX_COPIES = 4
"""GGML_SCHED_MAX_COPIES (ggml/src/ggml-backend.cpp): the copies of each input a scheduler with
pipeline parallelism keeps (``n_copies = parallel ? GGML_SCHED_MAX_COPIES : 1``)."""
NO_PIPELINE_FLAGS = (
    "-nkvo",
    "--no-kv-offload",
    "-ot",
    "--override-tensor",
    "-cmoe",
    "--cpu-moe",
    "-ncmoe",
    "--n-cpu-moe",
)
"""Arguments that turn pipeline parallelism off (src/llama-context.cpp: it needs
cparams.offload_kqv and no tensor overrides; common/arg.cpp's --cpu-moe and --n-cpu-moe add
tensor overrides)."""
_EPSILON = 1e-9
MMPROJ_WARMUP = {"gemma3": 0, "qwen2vl_merger": 46 * 46, "qwen3vl_merger": 46 * 46}
"""Projectors whose CLIP compute buffer is modelled, by clip.projector_type, and the tokens of
the square image tools/mtmd/clip.cpp reserves it with (load_hparams: set_warmup_n_tokens, "avoid
OOM on warmup"; 0: clip.vision.image_size): sqrt(tokens) x patch_size x merge pixels a side. A
larger image grows the buffer when it comes (ggml_backend_sched_alloc_graph); other projectors
(window attention, tiling, resamplers) and builds of before CLIP's flash attention are not
modelled."""
MMPROJ_MERGE = 2
"""n_merge of Qwen-VL projectors without clip.vision.spatial_merge_size (clip.cpp)."""
DRAFT_PER_SLOT_LAST = 9037
"""The last build known to give each slot a draft context of its own (n_parallel 1, n_ctx -cd or
the slot's; ggml-org/llama.cpp#22554 runs b9037 with -cd). Builds since ggml-org/llama.cpp#22838
hold one draft context beside the target, with its n_ctx and slots (common/speculative.cpp,
common_speculative_init_result); the few builds between are counted as those."""


@dataclass(frozen=True)
class VllmClaim:
    """A vLLM replica: ``fraction`` of each of its GPUs (tensor parallel: every one)."""

    service: str
    gpus: tuple[int, ...]
    fraction: float
    group: str = ""  # a swap group: its members run one at a time


@dataclass(frozen=True)
class LlamaClaim:
    """A llama-server profile; ``gpus == ()`` means every GPU of the host.

    ``ctx_size`` is the total over the ``parallel`` slots (0: the model's context_length);
    ``gpu_layers`` is --n-gpu-layers: "", "auto", "all" or a number; ``flash_attn`` is
    --flash-attn ("" and "auto" count as on, as llama.cpp's auto picks on CUDA); ``build`` is the
    llama.cpp build number it runs (None: a current build).

    ``mmproj`` names the multimodal projector it loads: a path, HF_MMPROJ or URL_MMPROJ (one
    downloaded) or "" (none), with its header ``mmproj_model``; ``draft`` the draft model (a path,
    HF_DRAFT or ""), with its header ``draft_model``, -ngld, -ctkd/-ctvd and -cd (0: none).
    """

    service: str
    gpus: tuple[int, ...]
    model: GgufInfo | None
    ctx_size: int
    parallel: int = 1
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    gpu_layers: str = ""
    flash_attn: str = ""
    n_ubatch: int = N_UBATCH
    kv_unified: bool = False
    swa_full: bool = False
    group: str = ""  # a swap group: its members run one at a time
    no_pipeline: bool = False  # --split-mode other than layer, -nkvo or tensor overrides
    cpu_moe_layers: int = 0  # --n-cpu-moe: the first n layers' experts stay in RAM; -1 all
    cpu_ffn_layers: int = 0  # --n-cpu-ffn: the first n layers' dense FFN weights stay in RAM
    other_overrides: bool = False  # an -ot pattern gpuprov does not read
    build: int | None = None
    mmproj: str = ""
    mmproj_model: GgufInfo | None = None
    mmproj_offload: bool = True  # --no-mmproj-offload or --mmproj-device none: kept in RAM
    mmproj_device: str = ""  # --mmproj-device: the GPU it names (counted on the first)
    draft: str = ""
    draft_model: GgufInfo | None = None
    draft_gpu_layers: str = ""
    draft_cache_type_k: str = "f16"
    draft_cache_type_v: str = "f16"
    draft_ctx: int = 0


def llama_claim(
    service: str,
    server: LlamaServer,
    model: GgufInfo | None,
    mmproj: GgufInfo | None = None,
    draft: GgufInfo | None = None,
) -> LlamaClaim:
    """A llama-server profile's claim on every GPU, from its arguments as llama.cpp reads them
    (a --ctx-size in extra_args counts); a setting they leave out is llama.cpp's default, with
    the context at the model's context_length (what newer builds do) and, without --parallel,
    4 slots sharing one unified cache (llama-server's "n_parallel is set to auto"). `mmproj`
    and `draft` are the headers of the projector and draft model the arguments name."""
    auto_slots = not (server.parallel and server.parallel > 0)
    return LlamaClaim(
        service=service,
        gpus=(),
        model=model,
        ctx_size=max(server.ctx_size or 0, 0),
        parallel=4 if auto_slots else server.parallel or 1,
        cache_type_k=server.cache_type_k or "f16",
        cache_type_v=server.cache_type_v or "f16",
        gpu_layers=server.n_gpu_layers or "",
        flash_attn=server.flash_attn or "",
        n_ubatch=_ubatch(server.argv),
        kv_unified=auto_slots or _flag(server.argv, "-kvu", "--kv-unified"),
        swa_full=_flag(server.argv, "--swa-full"),
        no_pipeline=_flag(server.argv, *NO_PIPELINE_FLAGS) or _split_mode(server.argv) != "layer",
        build=build_number(server.build),
        **_in_ram(server.argv),
        **_mmproj_args(server, mmproj),
        **_draft_args(server, draft),
    )


HF_MMPROJ = "-hf"
"""LlamaClaim.mmproj of a server that downloads its model's repository with -hf: llama-server
loads the repository's mmproj too, if it has one, unless --no-mmproj (common/arg.cpp)."""
URL_MMPROJ = "--mmproj-url"
"""LlamaClaim.mmproj of a projector downloaded from a URL."""
HF_DRAFT = "-hfd"
"""LlamaClaim.draft of a draft model downloaded with --spec-draft-hf / -hfd."""


def _last(argv: Sequence[str], on: tuple[str, ...], off: tuple[str, ...], default: bool) -> bool:
    """A switch llama.cpp reads as on/off pairs: the last of them wins."""
    state = default
    for arg in argv:
        state = True if arg in on else False if arg in off else state
    return state


def _mmproj_args(server: LlamaServer, header: GgufInfo | None) -> dict[str, Any]:
    """The projector the arguments load (common/arg.cpp: --mmproj, --mmproj-url, and -hf's unless
    --no-mmproj) and whether onto a GPU (--no-mmproj-offload, --mmproj-device none)."""
    argv = server.argv
    source = server.mmproj or (URL_MMPROJ if _values(argv, "-mmu", "--mmproj-url") else "")
    auto = _last(argv, ("--mmproj-auto",), ("--no-mmproj", "--no-mmproj-auto"), True)
    if not source and auto and _values(argv, "-hf", "-hfr", "--hf-repo"):
        source = HF_MMPROJ
    device = (_values(argv, "-mmdev", "--mmproj-device") or [""])[-1]
    offload = _last(argv, ("--mmproj-offload",), ("--no-mmproj-offload",), True)
    kept = device.strip().lower() == "none"
    return {
        "mmproj": source,
        "mmproj_model": header,
        "mmproj_offload": offload and not kept,
        "mmproj_device": "" if kept else device.strip(),
    }


def _draft_args(server: LlamaServer, header: GgufInfo | None) -> dict[str, Any]:
    """The draft model the arguments load and its settings (common/arg.cpp: -md, -hfd, -ngld,
    -ctkd, -ctvd, -cd), each the last given; cache types default to f16."""
    argv = server.argv
    hf = _values(argv, "--spec-draft-hf", "-hfd", "-hfrd", "--hf-repo-draft")
    layers = _values(
        argv, "-ngld", "--gpu-layers-draft", "--n-gpu-layers-draft", "--spec-draft-ngl"
    )
    cache_k = _values(argv, "-ctkd", "--cache-type-k-draft", "--spec-draft-type-k")
    cache_v = _values(argv, "-ctvd", "--cache-type-v-draft", "--spec-draft-type-v")
    ctx = (_values(argv, "-cd", "--ctx-size-draft") or [""])[-1]
    return {
        "draft": server.model_draft or (HF_DRAFT if hf else ""),
        "draft_model": header,
        "draft_gpu_layers": (layers or [""])[-1],
        "draft_cache_type_k": (cache_k or ["f16"])[-1].strip().lower() or "f16",
        "draft_cache_type_v": (cache_v or ["f16"])[-1].strip().lower() or "f16",
        "draft_ctx": int(ctx) if ctx.isdigit() else 0,
    }


def build_number(label: str | None) -> int | None:
    """The build number of a label as the llama-server probe writes it ("b7895 (a1b2c3d)",
    "b7895"); None for anything else."""
    head = (label or "").strip().split(" ", 1)[0]
    digits = head[1:]
    return int(digits) if head[:1] == "b" and digits.isdigit() else None


def _in_ram(argv: Sequence[str]) -> dict[str, Any]:
    """The weights the arguments keep in RAM, as common/arg.cpp reads them: --cpu-moe every
    layer's experts, --n-cpu-moe N those of layers 0..N-1, --n-cpu-ffn N their dense FFN, and
    -ot PATTERN=CPU when PATTERN names experts and no layer (no digit: "exps", "\\.ffn_.*_exps\\."
    and the like); any other -ot pattern is noted, not guessed. Each flag may repeat."""
    moe = [int(v) for v in _values(argv, "-ncmoe", "--n-cpu-moe") if v.isdigit()]
    ffn = [int(v) for v in _values(argv, "-ncffn", "--n-cpu-ffn") if v.isdigit()]
    every, other = _flag(argv, "-cmoe", "--cpu-moe"), False
    for value in _values(argv, "-ot", "--override-tensor"):
        for item in value.split(","):
            pattern, _, target = item.rpartition("=")
            experts = "exps" in pattern and not any(c.isdigit() for c in pattern)
            if experts and target.upper() == "CPU":
                every = True
            elif pattern:
                other = True
    return {
        "cpu_moe_layers": -1 if every else max(moe, default=0),
        "cpu_ffn_layers": max(ffn, default=0),
        "other_overrides": other,
    }


def _flag(argv: Sequence[str], *names: str) -> bool:
    return any(arg in names for arg in argv)


def _values(argv: Sequence[str], *names: str) -> list[str]:
    """Every value given to one of `names`, in order: the next argument, or after "=" (how the
    profile's own arguments may spell it); "" for one given last without a value."""
    found = []
    for i, arg in enumerate(argv):
        name, eq, inline = arg.partition("=")
        if name in names:
            found.append(inline if eq else (argv[i + 1] if i + 1 < len(argv) else ""))
    return found


def _split_mode(argv: Sequence[str]) -> str:
    """--split-mode as llama.cpp reads it (the last one wins); "layer" when absent."""
    return (_values(argv, "-sm", "--split-mode") or ["layer"])[-1].lower()


def _ubatch(argv: Sequence[str]) -> int:
    """--ubatch-size as llama.cpp reads it (the last one wins); the default when absent or odd."""
    text = (_values(argv, "-ub", "--ubatch-size") or [""])[-1]
    return int(text) if text.isdigit() and int(text) > 0 else N_UBATCH


@dataclass(frozen=True)
class LlamaMemory:
    """What one llama-server allocates beside its weights, in MiB: KV cache and recurrent state
    over all its GPUs, compute buffers and (builds before KV_SCRATCH_BUILD) CUDA's pool of F16
    cache copies on each GPU; ``cells`` is the padded n_ctx."""

    kv_mib: float
    rs_mib: float
    compute_mib: float
    cells: int
    kv_layers: int
    swa_layers: int
    rs_layers: int
    notes: tuple[str, ...] = ()
    kv_by_layer: tuple[int, ...] = ()  # bytes of KV cache in each layer
    rs_by_layer: tuple[int, ...] = ()  # bytes of recurrent state in each layer
    pool_mib: float = 0.0

    def from_layer(self, first: int) -> tuple[float, float]:
        """KV and state in MiB of layers first.. (those -ngl puts on the GPUs)."""
        kv, rs = sum(self.kv_by_layer[max(first, 0) :]), sum(self.rs_by_layer[max(first, 0) :])
        return kv / MIB, rs / MIB


def llama_memory(claim: LlamaClaim, model: GgufInfo, n_gpus: int = 1) -> LlamaMemory | str:
    """The KV cache, recurrent state and compute buffers llama.cpp allocates for `claim` on
    `n_gpus` GPUs; a reason string when the header does not say enough (unknown is never
    guessed)."""
    ctx = claim.ctx_size if claim.ctx_size > 0 else model.context_length
    if not ctx:
        return "ctx_size 0 and no context_length in the header"
    n = model.block_count
    if n is None or model.head_count_kv is None:
        return "header lacks block_count or head_count_kv"
    types = []
    for cache in (claim.cache_type_k, claim.cache_type_v):
        name = _cache_type(cache)
        if name not in KV_CACHE_TYPES:
            return f"cache type {name!r} unknown"
        types.append(GGML_TYPES[TYPE_IDS[name]])
    flash = _cache_type(claim.flash_attn) not in FLASH_OFF
    if not flash and types[1][1] > 1:
        return "a quantized V cache needs flash attention (llama.cpp refuses it)"
    layers = _layer_kinds(model)
    if isinstance(layers, str):
        return layers
    kv_heads, recurrent, sliding = layers
    slots = max(claim.parallel, 1)
    cells, streams = _cells(ctx, slots, claim.kv_unified)
    window = model.sliding_window or 0
    swa_cells = cells
    if any(sliding) and not claim.swa_full:
        reach = window * (slots if claim.kv_unified else 1) + claim.n_ubatch
        swa_cells = min(cells, _pad(reach))
    kv_by_layer = [0] * n
    notes: list[str] = []
    for il in range(n):
        if kv_heads[il] == 0 or recurrent[il] == "only":
            continue
        if model.key_length is None or model.value_length is None:
            return "header lacks key/value length"
        per_stream = swa_cells if sliding[il] else cells
        for length, (_, block, size) in zip(
            (model.key_length, model.value_length), types, strict=True
        ):
            kv_by_layer[il] += (
                per_stream * streams * math.ceil(kv_heads[il] * length / block) * size
            )
    kv = sum(kv_by_layer)
    rs = _recurrent_bytes(model, recurrent, slots)
    if isinstance(rs, str):
        return rs
    rs_count = sum(1 for kind in recurrent if kind)
    rs_by_layer = [rs // rs_count if kind else 0 for kind in recurrent]  # each holds the same
    copies = SCHED_MAX_COPIES if _pipeline(claim, n, n_gpus) else 1
    if model.kv_lora_rank:
        notes.append("MLA: V counted")
    if copies > 1:
        notes.append(f"pipeline parallel: {copies} input copies")
    if window and not any(sliding) and not claim.swa_full:
        notes.append("SWA layers unknown: full context")
    max_cells = max(
        (swa_cells if sliding[il] else cells for il in range(n) if kv_heads[il]), default=0
    )
    convert = _f16_copies(model, claim, flash, layers, (cells, swa_cells, streams))
    pool = convert if _before(claim, KV_SCRATCH_BUILD) else 0
    masks = _masks(flash, _before(claim, F16_MASK_BUILD), layers, (cells, swa_cells))
    compute = _compute_mib(model, claim.n_ubatch, flash, masks, max_cells, copies, convert - pool)
    if compute is None:
        compute = COMPUTE_FALLBACK_MIB
        notes.append("compute: fallback")
    if flash and masks[1]:
        notes.append(f"b{claim.build}: F32 KQ mask cast to F16")
    return LlamaMemory(
        kv_mib=kv / MIB,
        rs_mib=rs / MIB,
        compute_mib=compute,
        pool_mib=pool / MIB,
        cells=cells * streams,
        kv_layers=sum(1 for il in range(n) if kv_heads[il] and recurrent[il] != "only"),
        swa_layers=sum(1 for il in range(n) if kv_heads[il] and sliding[il]),
        rs_layers=rs_count,
        notes=tuple(notes),
        kv_by_layer=tuple(kv_by_layer),
        rs_by_layer=tuple(rs_by_layer),
    )


def _pipeline(claim: LlamaClaim, n_layer: int, n_gpus: int) -> bool:
    """Whether llama.cpp runs the claim with pipeline parallelism (src/llama-context.cpp,
    llama_context::llama_context: more than one device, n_gpu_layers > n_layer, split mode
    layer, the KV cache offloaded and no tensor overrides)."""
    if n_gpus < 2 or claim.no_pipeline:
        return False
    text = claim.gpu_layers.strip().lower()
    try:
        layers = int(text)
    except ValueError:
        return text in ("", "auto", "all")
    return layers < 0 or layers > n_layer


def _pad(n: int) -> int:
    return -(-n // KV_PAD) * KV_PAD


def _cells(ctx: int, slots: int, unified: bool) -> tuple[int, int]:
    """Cells per stream and streams (llama-context.cpp: n_ctx padded, split unless unified)."""
    n_ctx = _pad(ctx)
    if unified or slots == 1:
        return n_ctx, 1
    return _pad(n_ctx // slots), slots


def _layer_kinds(model: GgufInfo) -> tuple[list[int], list[str], list[bool]] | str:
    """Per layer: its KV head count, whether it is recurrent ("only", "also" or ""), and
    whether it slides; a reason string for what this model does not know."""
    n = model.block_count or 0
    arch = model.architecture or ""
    array = model.head_count_kv_layers
    if array is not None and len(array) != n:
        return "per-layer head_count_kv does not match block_count"
    kv_heads = list(array) if array is not None else [model.head_count_kv or 0] * n
    recurrent = [""] * n
    if arch in INTERVAL_HYBRIDS:
        every = model.full_attention_interval or INTERVAL_HYBRIDS[arch]
        recurrent = ["" if (il + 1) % every == 0 else "only" for il in range(n)]
    elif arch in RECURRENT:
        recurrent = ["only"] * n
    elif arch in LAYER_HYBRIDS:
        if array is None:
            return f"{arch} header lacks per-layer head_count_kv"
        ff = model.feed_forward_layers if arch.startswith("nemotron_h") else None
        if ff is not None and len(ff) != n:
            return "per-layer feed_forward_length does not match block_count"
        recurrent = [
            "only" if kv_heads[il] == 0 and (ff is None or ff[il] == 0) else "" for il in range(n)
        ]
    elif "rwkv" in arch or model.ssm_inner_size or model.shortconv_l_cache:
        return f"recurrent state of {arch or 'this architecture'} not modelled"
    sliding = [False] * n
    flags = model.sliding_window_layers
    if model.sliding_window:
        if flags is not None and len(flags) == n:
            sliding = [bool(f) for f in flags]
        elif arch in SWA_PATTERNS:
            every = SWA_PATTERNS[arch]
            sliding = [il % every < every - 1 for il in range(n)]
    return kv_heads, recurrent, sliding


def _recurrent_bytes(model: GgufInfo, recurrent: list[str], slots: int) -> int | str:
    """f32 conv and ssm state of every recurrent layer, for max(1, slots) cells."""
    count = sum(1 for kind in recurrent if kind)
    if not count:
        return 0
    state = model.ssm_state_size or 0
    inner = model.ssm_inner_size or 0
    if model.shortconv_l_cache:
        if model.embedding_length is None:
            return "header lacks embedding_length for the shortconv state"
        conv = model.embedding_length * (model.shortconv_l_cache - 1)
    elif model.ssm_conv_kernel is None or not inner:
        return "header lacks ssm.conv_kernel or ssm.inner_size of its recurrent layers"
    else:
        group = model.ssm_group_count or 0
        conv = max(model.ssm_conv_kernel - 1, 0) * (inner + 2 * group * state)
    return count * (conv + state * inner) * 4 * max(slots, 1)


def _f16_copies(
    model: GgufInfo,
    claim: LlamaClaim,
    flash: bool,
    layers: tuple[list[int], list[str], list[bool]],
    cells: tuple[int, int, int],
) -> int:
    """Bytes of the f16 copies of a K or V cache that is not f16, which CUDA's flash attention
    keeps beside its output for a ubatch-sized batch (ggml-cuda/fattn.cu,
    ggml_cuda_flash_attn_ext_get_alloc_size: the tile and MMA kernels read f16 only), for the
    layer that needs the most; MLA's V is a view of K and is converted with it."""
    if not flash:
        return 0
    kv_heads, recurrent, sliding = layers
    full, swa, streams = cells
    parts = [(claim.cache_type_k, model.key_length)]
    if not model.kv_lora_rank:
        parts.append((claim.cache_type_v, model.value_length))
    largest = 0
    for il, heads in enumerate(kv_heads):
        if not heads or recurrent[il] == "only":
            continue
        n_kv = (swa if sliding[il] else full) * streams
        size = sum(
            n_kv * heads * (length or 0) * 2
            for cache, length in parts
            if _cache_type(cache) != "f16"
        )
        largest = max(largest, size)
    return largest


def _before(claim: LlamaClaim, build: int) -> bool:
    return claim.build is not None and claim.build < build


def _masks(
    flash: bool,
    f32_input: bool,
    layers: tuple[list[int], list[str], list[bool]],
    cells: tuple[int, int],
) -> tuple[int, int]:
    """Bytes per token of the KQ masks attention reads (one per cache: the full one over `cells`
    cells, the sliding-window one over its own), F16 with flash attention and F32 without; and
    the bytes per token of the F32 masks an older build casts them from (F16_MASK_BUILD)."""
    kv_heads, recurrent, sliding = layers
    full, swa = cells
    attends = [il for il, heads in enumerate(kv_heads) if heads and recurrent[il] != "only"]
    total = (full if any(not sliding[il] for il in attends) else 0) + (
        swa if any(sliding[il] for il in attends) else 0
    )
    if not flash:
        return total * 4, 0
    return total * 2, total * 4 if f32_input else 0


def _compute_mib(
    model: GgufInfo,
    ubatch: int,
    flash: bool,
    masks: tuple[int, int],
    cells: int,
    copies: int = 1,
    convert: int = 0,
) -> float | None:
    """One GPU's compute buffers: the larger of the two peaks of llama.cpp's worst-case graph
    (graph_reserve: a full ubatch over the whole cache), in MiB.

    Attention: the KQ masks (`masks`: what attention reads and the F32 masks an older build
    casts them from, per token), the f32 Q, K and V of the ubatch, LIVE_ACTIVATIONS activations
    and, without flash attention, the f32 scores of every head over the `cells` cells of the
    largest layer (soft_max runs in place); with flash attention, on CUDA, `convert`
    bytes of f16 copies of a quantized cache. Output: the f32 logits of every token of the ubatch
    and 2 activations; the attention tensors are freed by then and ggml-alloc reuses their memory.

    With pipeline parallelism (`copies` > 1) each GPU's inputs from another backend, the KQ mask
    and the n_embd-wide hidden state its first layer reads, are held `copies` times and never
    freed: ggml_backend_sched_split_graph (ggml/src/ggml-backend.cpp) makes n_copies copies of
    every split input and marks them output, and ggml_gallocr_free_node (ggml/src/ggml-alloc.c)
    never frees an output. They come on top of both peaks.
    """
    embd, vocab = model.embedding_length, model.vocab_size
    heads, heads_kv = model.head_count, model.head_count_kv
    k_len, v_len = model.key_length, model.value_length
    if vocab is None or embd is None or heads is None or heads_kv is None:
        return None
    if k_len is None or v_len is None:
        return None
    mask, f32_input = masks
    qkv = heads * k_len + heads_kv * (k_len + v_len)
    scores = 0 if flash else cells * heads * 4
    attention = ubatch * (mask + f32_input + scores + 4 * (qkv + LIVE_ACTIVATIONS * embd)) + convert
    output = ubatch * 4 * (vocab + 2 * embd)
    if copies <= 1:
        return max(attention, output) / MIB
    held = copies * ubatch * (mask + 4 * embd)
    return (max(attention - ubatch * mask, output) + held) / MIB


@dataclass(frozen=True)
class Holder:
    """What one service holds on one GPU; ``mib`` None is unknown, and ``how`` says why.
    ``parts`` are lines of their own under it (label, MiB counted in ``mib`` or None when none
    is, how), and ``missing`` what of it is not counted, each with why."""

    service: str
    mib: float | None
    how: str
    group: str = ""  # a swap group: only its largest member counts
    parts: tuple[tuple[str, float | None, str], ...] = ()
    missing: tuple[str, ...] = ()


@dataclass(frozen=True)
class GpuRow:
    """One GPU: its size and what each service holds on it."""

    index: int
    name: str
    total_mib: int | None
    holders: tuple[Holder, ...]

    @property
    def used_mib(self) -> float:
        """What the known holders add up to; of a swap group's members (one runs at a time),
        the largest."""
        alone = sum(h.mib for h in self.holders if h.mib is not None and not h.group)
        largest: dict[str, float] = {}
        for h in self.holders:
            if h.group and h.mib is not None:
                largest[h.group] = max(largest.get(h.group, 0.0), h.mib)
        return alone + sum(largest.values())

    @property
    def free_mib(self) -> float | None:
        return None if self.total_mib is None else self.total_mib - self.used_mib

    @property
    def unknown(self) -> bool:
        return self.total_mib is None or any(h.mib is None or h.missing for h in self.holders)

    @property
    def over(self) -> bool:
        return self.total_mib is not None and self.used_mib > self.total_mib + _EPSILON


@dataclass(frozen=True)
class Budget:
    """Per-GPU rows and the problems found; an "unknown: ..." problem is a warning."""

    rows: tuple[GpuRow, ...]
    problems: list[str]

    @property
    def fits(self) -> bool:
        """True unless a problem other than an "unknown:" warning was found."""
        return all(p.startswith("unknown:") for p in self.problems)

    def lines(self) -> list[str]:
        """A plain-text table: one line per GPU, then one per service holding memory on it."""
        out = [f"{'GPU':<4} {'NAME / SERVICE':<30} {'TOTAL':>10} {'HELD':>10} {'FREE':>10}  NOTE"]
        for row in self.rows:
            note = "over" if row.over else "unknown" if row.unknown else "ok"
            out.append(
                f"{row.index:<4} {_cut(row.name, 30):<30} {_size(row.total_mib):>10} "
                f"{_size(row.used_mib):>10} {_size(row.free_mib):>10}  {note}"
            )
            for h in row.holders:
                out.append(
                    f"{'':<4}   {_cut(h.service, 28):<28} {'':>10} {_size(h.mib):>10} "
                    f"{'':>10}  {h.how}".rstrip()
                )
                out += [
                    f"{'':<4}     + {_cut(label, 24):<24} {'':>10} {_size(mib):>10} {'':>10}  {how}"
                    for label, mib, how in h.parts
                ]
        return out


def budget(gpus: Sequence[Gpu], claims: Sequence[VllmClaim | LlamaClaim]) -> Budget:
    """What `claims` hold on each of `gpus`, and what does not fit or is not known."""
    by_index = {i if g.index is None else g.index: g for i, g in enumerate(gpus)}
    held: dict[int, list[Holder]] = {i: [] for i in by_index}
    fractions: dict[int, list[tuple[str, float, str]]] = {i: [] for i in by_index}
    problems: list[str] = []
    for claim in claims:
        wanted = tuple(dict.fromkeys(claim.gpus))
        if not wanted and isinstance(claim, LlamaClaim):
            wanted = tuple(by_index)
        if not wanted:
            problems.append(f"{claim.service}: uses no GPU of this host")
        present = [i for i in wanted if i in by_index]
        for i in wanted:
            if i not in by_index:
                have = ", ".join(str(j) for j in sorted(by_index)) or "none"
                problems.append(f"{claim.service}: GPU {i} is not on this host (GPUs: {have})")
        for position, i in enumerate(present):
            total = by_index[i].memory_total_mib
            if isinstance(claim, VllmClaim):
                holder = _vllm(claim, total)
                fractions[i].append((claim.service, claim.fraction, claim.group))
            else:
                holder = _llama(claim, len(present), first=position == 0)
            if claim.group:
                how = f"{holder.how}; swap group {claim.group}: one member at a time"
                holder = dataclasses.replace(holder, group=claim.group, how=how)
            held[i].append(holder)
    rows = tuple(
        GpuRow(i, by_index[i].name or "?", by_index[i].memory_total_mib, tuple(held[i]))
        for i in sorted(by_index)
    )
    for row in rows:
        problems.extend(_row_problems(row, fractions[row.index]))
    return Budget(rows, problems)


def _fraction_sum(fractions: list[tuple[str, float, str]]) -> float:
    """The vLLM fractions that can hold a GPU at once: of a swap group, the largest."""
    alone = sum(f for _, f, group in fractions if not group)
    largest: dict[str, float] = {}
    for _, f, group in fractions:
        if group:
            largest[group] = max(largest.get(group, 0.0), f)
    return alone + sum(largest.values())


def _row_problems(row: GpuRow, fractions: list[tuple[str, float, str]]) -> list[str]:
    where = f"GPU {row.index} ({row.name})"
    problems = []
    total = _fraction_sum(fractions)
    if total > 1.0 + _EPSILON:
        parts = ", ".join(
            f"{s} {f:g}" + (f" (swap group {group})" if group else "") for s, f, group in fractions
        )
        problems.append(
            f"{where}: vLLM fractions sum to {total:.2f} > 1.0 ({parts});"
            " vLLM refuses to start without that much free memory"
        )
    if row.over and row.total_mib is not None:
        problems.append(
            f"{where}: {_size(row.used_mib)} held of {_size(row.total_mib)}"
            f" (over by {_size(row.used_mib - row.total_mib)})"
        )
    if row.holders and row.total_mib is None:
        problems.append(f"unknown: {where}: total memory unknown, not checked")
    for h in row.holders:
        if h.mib is None:
            problems.append(f"unknown: {h.service} on {where}: {h.how}")
        problems += [f"unknown: {h.service} on {where}: {why}" for why in h.missing]
    return problems


def _vllm(claim: VllmClaim, total: int | None) -> Holder:
    if total is None:
        return Holder(claim.service, None, f"vLLM {claim.fraction:g} x unknown total")
    return Holder(claim.service, claim.fraction * total, f"vLLM {claim.fraction:g} x {total} MiB")


def _llama(claim: LlamaClaim, n_gpus: int, first: bool = True) -> Holder:
    """One GPU's share of a llama-server: weights, KV and state split evenly over its GPUs, plus
    compute buffers and a CUDA context on each; its projector on the `first` GPU, its draft model
    split as the model is."""
    share = llama_share(claim, n_gpus, first)
    if isinstance(share, str):
        return Holder(claim.service, None, f"llama.cpp: {share}")
    memory = share.memory
    how = (
        f"llama.cpp weights {_size(share.weights_mib)} + KV {_size(share.kv_mib)}"
        f" ({memory.cells} ctx / {max(claim.parallel, 1)} slots, {_cache_type(claim.cache_type_k)}"
        f"/{_cache_type(claim.cache_type_v)}) in {memory.kv_layers} layers"
    )
    if memory.swa_layers:
        how += f" ({memory.swa_layers} SWA)"
    if memory.rs_layers:
        how += f" + state {_size(share.rs_mib)} in {memory.rs_layers} layers"
    how += f" + compute {_size(memory.compute_mib)}"
    if share.pool_mib:
        how += f" + CUDA pool {_size(share.pool_mib)} (F16 cache copies, b{claim.build})"
    how += f" + CUDA {CUDA_CONTEXT_MIB} MiB"
    notes = [*memory.notes, *share.notes]
    if notes:
        how += f" [{'; '.join(notes)}]"
    if share.layers:
        how += f", {share.layers} layers"
    if n_gpus > 1:
        how += f", 1/{n_gpus} of each"
    extra = [part for part in (share.mmproj, share.draft) if part is not None]
    return Holder(
        claim.service,
        share.total_mib,
        how,
        parts=tuple((part.label, part.counted_mib, part.how) for part in extra),
        missing=tuple(part.missing for part in extra if part.missing),
    )


def _in_ram_bytes(claim: LlamaClaim, model: GgufInfo, first_gpu_layer: int) -> int:
    """Bytes of the offloaded layers' weights that --cpu-moe / --n-cpu-moe / --n-cpu-ffn (or
    -ot with the experts pattern) keep in RAM: those layers' experts or dense FFN weights."""
    kept = 0
    for count, sizes in (
        (claim.cpu_moe_layers, model.expert_bytes_layers),
        (claim.cpu_ffn_layers, model.ffn_bytes_layers),
    ):
        if not count or sizes is None:
            continue
        last = len(sizes) if count < 0 else min(count, len(sizes))
        kept += sum(sizes[max(first_gpu_layer, 0) : last])
    return kept


def _cache_type(name: str) -> str:
    return name.strip().lower() or "f16"


def _placement(claim: LlamaClaim, model: GgufInfo, tensor_bytes: int) -> tuple[float, int, str]:
    """Bytes of weights on the GPUs, the first layer there (its KV and state and those after
    it are on the GPUs too), and how -ngl reads.

    llama.cpp keeps the input layer (token_embd) in RAM; --n-gpu-layers n of block_count + 1
    puts the output layer and the last n - 1 repeating layers on the GPUs (src/llama-model.cpp:
    i_gpu_start = n_layer + 1 - n_gpu_layers); a model without output.weight reads token_embd
    there as its output. What --cpu-moe and its kin keep in RAM is left out. Repeating layers
    count alike here, which a hybrid's or a sliding-window model's need not; a header that does
    not say its token_embd and output sizes counts every weight on the GPUs.
    """
    blocks = model.block_count or 0
    text = claim.gpu_layers.strip().lower()
    n = int(text) if text.lstrip("-").isdigit() else None
    if n is not None and 0 <= n < blocks + 1:
        label = f"{n}/{blocks + 1}"
    else:  # all: a number past the model, a negative one, "auto", "all" or something else
        label = (
            ""
            if n is not None or text in ("", "auto", "all")
            else f"{claim.gpu_layers!r} read as all"
        )
        n = blocks + 1
    if not blocks:
        return float(tensor_bytes), 0, label
    embd = output = 0  # sizes the header does not give: every weight counts as a layer's
    if model.token_embd_bytes is not None and model.output_bytes is not None:
        embd, output = model.token_embd_bytes, model.output_bytes
    on_gpu = max(n - 1, 0)
    weights = (tensor_bytes - embd - output) * on_gpu / blocks
    weights += (output or embd) if n >= 1 else 0  # tied: token_embd read as the output
    weights -= _in_ram_bytes(claim, model, blocks - on_gpu)
    return max(weights, 0.0), blocks - on_gpu, label


def _size(mib: float | None) -> str:
    if mib is None:
        return "?"
    if abs(mib) >= 1024:
        return f"{mib / 1024:.1f} GiB"
    return f"{mib:.1f} MiB"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


@dataclass(frozen=True)
class LlamaShare:
    """One GPU's share of a llama-server, part by part in MiB, as `budget` counts it; ``layers``
    is "n/m" when --n-gpu-layers offloads only n of the m layers (the rest stay in RAM);
    ``pool_mib`` is CUDA's pool of F16 cache copies of a build before KV_SCRATCH_BUILD;
    ``mmproj`` and ``draft`` what its projector and draft model hold there (None: none)."""

    weights_mib: float
    kv_mib: float
    rs_mib: float
    compute_mib: float
    cuda_mib: float
    memory: LlamaMemory
    layers: str
    notes: tuple[str, ...] = ()
    pool_mib: float = 0.0
    mmproj: Part | None = None
    draft: Part | None = None

    @property
    def total_mib(self) -> float:
        parts = self.weights_mib + self.kv_mib + self.rs_mib + self.compute_mib + self.pool_mib
        extra = sum(part.mib for part in (self.mmproj, self.draft) if part is not None)
        return parts + extra + self.cuda_mib


def llama_share(claim: LlamaClaim, n_gpus: int, first_gpu: bool = True) -> LlamaShare | str:
    """What one of `n_gpus` GPUs holds of `claim` (the parts `budget` adds up for it), the
    projector on the first one (`first_gpu`); a reason string when the model's header does not say
    enough."""
    model = claim.model
    if model is None:
        return "model header unknown"
    if model.split_count is not None and model.split_count > 1:
        return f"split model ({model.split_count} files)"
    if model.tensor_bytes is None:
        return "a tensor type is unknown"
    n = max(n_gpus, 1)
    memory = llama_memory(claim, model, n)
    if isinstance(memory, str):
        return memory
    weights, first, layers = _placement(claim, model, model.tensor_bytes)
    kv_mib, rs_mib = memory.from_layer(first)
    in_ram = _in_ram_bytes(claim, model, 0)
    notes = []
    if in_ram:
        notes.append(f"{_size(in_ram / MIB)} of FFN weights kept in RAM")
    if claim.other_overrides:
        notes.append("-ot patterns not read: their weights counted on the GPU")
    return LlamaShare(
        weights_mib=weights / n / MIB,
        kv_mib=kv_mib / n,
        rs_mib=rs_mib / n,
        compute_mib=memory.compute_mib,
        cuda_mib=CUDA_CONTEXT_MIB,
        memory=memory,
        layers=layers,
        notes=tuple(notes),
        pool_mib=memory.pool_mib,
        mmproj=mmproj_part(claim, first_gpu),
        draft=draft_part(claim, n),
    )


MMPROJ = "mmproj"
DRAFT = "draft model"
CLIP_LIVE_FLASH = 3
"""f32 activations of n_embd per patch live beside the FFN's up projection (n_ff per patch) in
a layer of a projector's vision tower, with flash attention. Checked against logged CLIP compute
buffers: gemma 3's 121.25 MiB (ggml-org/llama.cpp#22790) and tests/test_vram_mmproj.py."""
CLIP_LIVE_SCORES = 6
"""f32 activations of n_embd per patch live beside the f32 attention scores of every head over
every patch (clip.cpp build_attn without flash attention): gemma 3's 1132 MiB
(gpustack/gguf-parser-go#44) and tests/test_vram_mmproj.py."""


@dataclass(frozen=True)
class Part:
    """What a file llama-server loads beside its model holds on one GPU, in MiB: a multimodal
    projector (MMPROJ: weights and CLIP compute buffer) or a draft model (DRAFT: weights, KV
    cache and state, compute buffers). ``missing`` says what of it is not counted and why ("" when
    all is); ``how`` describes it."""

    label: str
    how: str
    weights_mib: float = 0.0
    kv_mib: float = 0.0
    compute_mib: float = 0.0
    missing: str = ""

    @property
    def mib(self) -> float:
        return self.weights_mib + self.kv_mib + self.compute_mib

    @property
    def counted_mib(self) -> float | None:
        """What is counted of it; None when nothing is."""
        return None if self.missing and not self.mib else self.mib


def _flash(claim: LlamaClaim) -> bool:
    return _cache_type(claim.flash_attn) not in FLASH_OFF


def _not_counted(label: str, why: str, weights_mib: float = 0.0) -> Part:
    return Part(label, why, weights_mib, missing=why)


def mmproj_part(claim: LlamaClaim, first: bool = True) -> Part | None:
    """The projector's share of one GPU: its weights and CLIP compute buffer on the `first`
    (clip.cpp loads it on one device: the first GPU unless --mmproj-device), nothing on the
    others nor with --no-mmproj-offload; None without a projector. Unknown parts are not
    counted, and say so."""
    source = claim.mmproj
    if not source or not first:
        return None
    if not claim.mmproj_offload:
        return Part(MMPROJ, "kept in RAM (--no-mmproj-offload)")
    if source in (HF_MMPROJ, URL_MMPROJ):
        left_out = " (--no-mmproj leaves it out)" if source == HF_MMPROJ else ""
        why = f"{MMPROJ} of {source} not counted: its size is unknown before download{left_out}"
        return _not_counted(MMPROJ, why)
    model = claim.mmproj_model
    if model is None or model.tensor_bytes is None:
        return _not_counted(MMPROJ, f"{MMPROJ} {source} not counted: its header was not read")
    if model.architecture != "clip":
        arch = model.architecture or "none"
        return _not_counted(MMPROJ, f"{MMPROJ} {source} not counted: architecture {arch}")
    weights = model.tensor_bytes / MIB
    compute = clip_compute_mib(model, _flash(claim))
    if isinstance(compute, str):
        why = f"{MMPROJ} compute buffer not counted: {compute}"
        return _not_counted(MMPROJ, f"weights {_size(weights)}; {why}", weights)
    how = f"weights {_size(weights)} + CLIP compute {_size(compute)} ({model.projector_type})"
    if claim.mmproj_device:
        how += f" [--mmproj-device {claim.mmproj_device}: counted on the first GPU]"
    return Part(MMPROJ, how, weights, compute_mib=compute)


def clip_compute_mib(model: GgufInfo, flash: bool) -> float | str:
    """The compute buffer tools/mtmd/clip.cpp reserves for a projector's warmup image
    (MMPROJ_WARMUP), in MiB; a reason string for a projector or header it does not model.

    The peak is a layer of the vision tower over every patch of the image: the FFN's up
    projection and CLIP_LIVE_FLASH activations, or without flash attention the f32 scores of
    every head and CLIP_LIVE_SCORES activations (build_attn: ggml_mul_mat(k, q) before
    soft_max). Qwen3-VL's deepstack mergers (qwen3vl.cpp) keep their outputs, projection_dim per
    merged patch, until the last layer."""
    kind = model.projector_type or "none"
    if kind not in MMPROJ_WARMUP:
        return f"projector {kind} not modelled"
    embd, ff = model.vision_embedding_length, model.vision_feed_forward_length
    heads, patch = model.vision_head_count, model.vision_patch_size
    if not (embd and ff and heads and patch):
        return "header lacks the vision tower's sizes"
    merge = model.vision_merge or MMPROJ_MERGE
    tokens = MMPROJ_WARMUP[kind]
    side = math.isqrt(tokens) * patch * merge if tokens else model.vision_image_size or 0
    n_pos = (side // patch) ** 2
    if not n_pos:
        return "header lacks clip.vision.image_size"
    deepstack, width = model.vision_deepstack_layers or 0, model.vision_projection_dim or 0
    if deepstack and not width:
        return "header lacks the projection_dim of its deepstack mergers"
    kept = deepstack * (n_pos // merge**2) * width
    peak = n_pos * (ff + CLIP_LIVE_FLASH * embd)
    if not flash:
        peak = max(peak, n_pos * (n_pos * heads + CLIP_LIVE_SCORES * embd))
    return 4 * (peak + kept) / MIB


def draft_claim(claim: LlamaClaim) -> tuple[LlamaClaim, int]:
    """The draft model's context as a claim, and how many of them llama-server makes.

    Builds after DRAFT_PER_SLOT_LAST make one beside the target with the target's n_ctx and
    slots. Earlier ones, and a claim giving -cd (which later builds refuse), make one per slot,
    of one sequence and -cd cells or the slot's (tools/server/server-context.cpp:
    params_dft.n_parallel = 1, n_ctx = speculative.n_ctx or llama_n_ctx_seq, n_batch the same).
    Both take -ctkd/-ctvd (f16 unless given) and -ngld (all unless given); flash attention,
    ubatch and GPUs are the target's (common_base_params_to_speculative copies them)."""
    target = claim.model
    ctx = claim.ctx_size if claim.ctx_size > 0 else (target.context_length if target else 0) or 0
    draft = dataclasses.replace(
        claim,
        model=claim.draft_model,
        ctx_size=ctx,
        cache_type_k=claim.draft_cache_type_k,
        cache_type_v=claim.draft_cache_type_v,
        gpu_layers=claim.draft_gpu_layers,
        cpu_moe_layers=0,
        cpu_ffn_layers=0,
        other_overrides=False,
        mmproj="",
        mmproj_model=None,
        draft="",
        draft_model=None,
    )
    if not (claim.draft_ctx > 0 or _before(claim, DRAFT_PER_SLOT_LAST + 1)):
        return draft, 1
    slots = max(claim.parallel, 1)
    cells = claim.draft_ctx or _cells(ctx, slots, claim.kv_unified)[0]
    per_slot = dataclasses.replace(
        draft, ctx_size=cells, parallel=1, kv_unified=False, n_ubatch=min(claim.n_ubatch, cells)
    )
    return per_slot, slots


def draft_part(claim: LlamaClaim, n_gpus: int) -> Part | None:
    """The draft model's share of one of `n_gpus` GPUs (split as the model is): its weights, the
    KV cache and state, and compute buffers of its context(s); None without a draft model.
    Unknown parts are not counted, and say so."""
    source = claim.draft
    if not source:
        return None
    if source == HF_DRAFT:
        why = f"{DRAFT} of {HF_DRAFT} not counted: its size is unknown before download"
        return _not_counted(DRAFT, why)
    if claim.draft_model is None:
        return _not_counted(DRAFT, f"{DRAFT} {source} not counted: its header was not read")
    draft, contexts = draft_claim(claim)
    if not draft.ctx_size:
        return _not_counted(DRAFT, f"{DRAFT} {source} not counted: the context is unknown")
    share = llama_share(draft, n_gpus)
    if isinstance(share, str):
        return _not_counted(DRAFT, f"{DRAFT} {source} not counted: {share}")
    kv = (share.kv_mib + share.rs_mib) * contexts
    compute = (share.compute_mib + share.pool_mib) * contexts
    memory = share.memory
    how = (
        f"weights {_size(share.weights_mib)} + KV {_size(kv)} ({memory.cells} ctx, "
        f"{_cache_type(draft.cache_type_k)}/{_cache_type(draft.cache_type_v)}) + compute "
        f"{_size(compute)}"
    )
    if contexts > 1:
        how += f", {contexts} contexts (one per slot)"
    if share.layers:
        how += f", {share.layers} layers"
    notes = [*memory.notes, *share.notes]
    if notes:
        how += f" [{'; '.join(notes)}]"
    return Part(DRAFT, how, share.weights_mib, kv, compute)
