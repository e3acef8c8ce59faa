"""The GPU memory each service of a host will hold, per GPU, and whether the plan fits.

vLLM reserves ``gpu_memory_utilization x total`` on every GPU it uses, and refuses to start when
less than that is free ("Free memory on device ... on startup is less than desired GPU memory
utilization", pytorch/pytorch#175666). llama-server holds its weights (the GGUF tensors), its KV
cache (sized from the GGUF header) and LLAMA_OVERHEAD_MIB on each GPU it uses. Pure: the inputs
are plain data and nothing is probed here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from checks.facts.model import Gpu, LlamaServer
from checks.services.gguf_header import GGML_TYPES, TYPE_IDS, GgufInfo

MIB = 1024 * 1024
LLAMA_OVERHEAD_MIB = 2048
"""CUDA context plus compute buffers of one llama-server, per GPU it uses: a generous constant.

llama.cpp measured the CUDA context at 107 MiB (RTX 4060 Ti) to 555 MiB (RTX PRO 6000)
(ggml-org/llama.cpp#23604); its memory breakdowns show compute buffers of 1164 MiB (RTX PRO 6000,
ggml-org/llama.cpp#27953), 1292 MiB (RTX 3090, ollama/ollama#16031) and 1553-1617 MiB (RTX 3090,
ggml-org/llama.cpp#24608). A GPU holding no layer (--n-gpu-layers 0) still gets compute buffers.
It is no upper bound: without flash attention the compute buffer grows with the context (164 MiB
at 2048, 2144 MiB at 32768: fedora-copr/logdetective#106), and ollama/ollama#16031 shows 4205 MiB
on an RTX 5090 holding no layer.
"""
KV_CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
_EPSILON = 1e-9


@dataclass(frozen=True)
class VllmClaim:
    """A vLLM replica: ``fraction`` of each of its GPUs (tensor parallel: every one)."""

    service: str
    gpus: tuple[int, ...]
    fraction: float


@dataclass(frozen=True)
class LlamaClaim:
    """A llama-server profile; ``gpus == ()`` means every GPU of the host.

    ``ctx_size`` is the total over the ``parallel`` slots (0: the model's context_length);
    ``gpu_layers`` is --n-gpu-layers: "", "auto", "all" or a number.
    """

    service: str
    gpus: tuple[int, ...]
    model: GgufInfo | None
    ctx_size: int
    parallel: int = 1
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    gpu_layers: str = ""


def llama_claim(service: str, server: LlamaServer, model: GgufInfo | None) -> LlamaClaim:
    """A llama-server profile's claim on every GPU, from its arguments as llama.cpp reads them
    (a --ctx-size in extra_args counts); a setting they leave out is llama.cpp's default, with
    the context at the model's context_length (what newer builds do)."""
    return LlamaClaim(
        service=service,
        gpus=(),
        model=model,
        ctx_size=max(server.ctx_size or 0, 0),
        parallel=server.parallel if server.parallel and server.parallel > 0 else 1,
        cache_type_k=server.cache_type_k or "f16",
        cache_type_v=server.cache_type_v or "f16",
        gpu_layers=server.n_gpu_layers or "",
    )


@dataclass(frozen=True)
class Holder:
    """What one service holds on one GPU; ``mib`` None is unknown, and ``how`` says why."""

    service: str
    mib: float | None
    how: str


@dataclass(frozen=True)
class GpuRow:
    """One GPU: its size and what each service holds on it."""

    index: int
    name: str
    total_mib: int | None
    holders: tuple[Holder, ...]

    @property
    def used_mib(self) -> float:
        """What the known holders add up to."""
        return sum(h.mib for h in self.holders if h.mib is not None)

    @property
    def free_mib(self) -> float | None:
        return None if self.total_mib is None else self.total_mib - self.used_mib

    @property
    def unknown(self) -> bool:
        return self.total_mib is None or any(h.mib is None for h in self.holders)

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
        return out


def budget(gpus: Sequence[Gpu], claims: Sequence[VllmClaim | LlamaClaim]) -> Budget:
    """What `claims` hold on each of `gpus`, and what does not fit or is not known."""
    by_index = {i if g.index is None else g.index: g for i, g in enumerate(gpus)}
    held: dict[int, list[Holder]] = {i: [] for i in by_index}
    fractions: dict[int, list[tuple[str, float]]] = {i: [] for i in by_index}
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
        for i in present:
            total = by_index[i].memory_total_mib
            if isinstance(claim, VllmClaim):
                held[i].append(_vllm(claim, total))
                fractions[i].append((claim.service, claim.fraction))
            else:
                held[i].append(_llama(claim, len(present)))
    rows = tuple(
        GpuRow(i, by_index[i].name or "?", by_index[i].memory_total_mib, tuple(held[i]))
        for i in sorted(by_index)
    )
    for row in rows:
        problems.extend(_row_problems(row, fractions[row.index]))
    return Budget(rows, problems)


def _row_problems(row: GpuRow, fractions: list[tuple[str, float]]) -> list[str]:
    where = f"GPU {row.index} ({row.name})"
    problems = []
    if sum(f for _, f in fractions) > 1.0 + _EPSILON:
        parts = ", ".join(f"{s} {f:g}" for s, f in fractions)
        problems.append(
            f"{where}: vLLM fractions sum to {sum(f for _, f in fractions):.2f} > 1.0 ({parts});"
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
    return problems


def _vllm(claim: VllmClaim, total: int | None) -> Holder:
    if total is None:
        return Holder(claim.service, None, f"vLLM {claim.fraction:g} x unknown total")
    return Holder(claim.service, claim.fraction * total, f"vLLM {claim.fraction:g} x {total} MiB")


def _llama(claim: LlamaClaim, n_gpus: int) -> Holder:
    """One GPU's share of a llama-server: weights and KV split evenly, plus the overhead."""
    model = claim.model
    if model is None:
        return Holder(claim.service, None, "llama.cpp: model header unknown")
    if model.split_count is not None and model.split_count > 1:
        return Holder(claim.service, None, f"llama.cpp: split model ({model.split_count} files)")
    if model.tensor_bytes is None:
        return Holder(claim.service, None, "llama.cpp: a tensor type is unknown")
    kv = _kv_bytes(claim, model)
    if isinstance(kv, str):
        return Holder(claim.service, None, f"llama.cpp: {kv}")
    kv_bytes, ctx = kv
    share, layers = _offload(claim.gpu_layers, model.block_count)
    weights = model.tensor_bytes * share / n_gpus / MIB
    cache = kv_bytes * share / n_gpus / MIB
    how = (
        f"llama.cpp weights {_size(weights)} + KV {_size(cache)}"
        f" ({ctx} ctx / {max(claim.parallel, 1)} slots, {_cache_type(claim.cache_type_k)}"
        f"/{_cache_type(claim.cache_type_v)}) + {LLAMA_OVERHEAD_MIB} MiB overhead"
    )
    if layers:
        how += f", {layers} layers"
    if n_gpus > 1:
        how += f", 1/{n_gpus} of each"
    return Holder(claim.service, weights + cache + LLAMA_OVERHEAD_MIB, how)


def _cache_type(name: str) -> str:
    return name.strip().lower() or "f16"


def _kv_bytes(claim: LlamaClaim, model: GgufInfo) -> tuple[int, int] | str:
    """The KV cache of all layers, in bytes, and its context; a reason string if unknown.

    Every layer counts with the header's largest KV head count and full context, so sliding-window,
    recurrent-hybrid and MLA models are overestimated, never under.
    """
    ctx = claim.ctx_size if claim.ctx_size > 0 else model.context_length
    if not ctx:
        return "ctx_size 0 and no context_length in the header"
    shape = (model.block_count, model.head_count_kv, model.key_length, model.value_length)
    if any(v is None for v in shape):
        return "header lacks block_count, head_count_kv or key/value length"
    layers, heads, k_len, v_len = (v or 0 for v in shape)
    total = 0
    for length, cache in ((k_len, claim.cache_type_k), (v_len, claim.cache_type_v)):
        name = _cache_type(cache)
        if name not in KV_CACHE_TYPES:
            return f"cache type {name!r} unknown"
        _, block, size = GGML_TYPES[TYPE_IDS[name]]
        total += layers * ctx * math.ceil(heads * length / block) * size
    return total, ctx


def _offload(gpu_layers: str, block_count: int | None) -> tuple[float, str]:
    """The share of weights and KV on the GPUs for --n-gpu-layers, and how it reads."""
    text = gpu_layers.strip().lower()
    try:
        n = int(text)
    except ValueError:
        return 1.0, "" if text in ("", "auto", "all") else f"{gpu_layers!r} read as all"
    if n < 0 or block_count is None or n >= block_count + 1:
        return 1.0, ""
    return n / (block_count + 1), f"{n}/{block_count + 1}"


def _size(mib: float | None) -> str:
    if mib is None:
        return "?"
    if abs(mib) >= 1024:
        return f"{mib / 1024:.1f} GiB"
    return f"{mib:.1f} MiB"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."
