"""`gpuprov fit`: would llama-server with these settings fit this model in these GPUs?

The estimate is the VRAM budget's (provision/vram.py) for one llama-server profile, from the
GGUF header of a local file (and of its projector and draft model); the GPUs are named (`--gpu`,
sized from the GPU table), read from captures (`--from`), or this host's (NVML). The largest
context that fits is searched over the same estimate, which grows with the context. Exit 0 fits
(or no GPU to judge), 1 does not fit, 2 bad input.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from provision.output import emit, printable

if TYPE_CHECKING:
    from checks.facts.model import Gpu
    from checks.services.gguf_header import GgufInfo
    from provision.vram import Budget, LlamaClaim, LlamaShare, Part

FIT_SCHEMA_VERSION = 2
SEARCH_LIMIT = 1 << 20
"""The largest --ctx searched when the header has no context_length."""
_NUMBER = re.compile(r"[0-9]{1,9}")
NOMINAL = "the GPU table's nominal size; the driver may report less"


class FitError(Exception):
    """Input `fit` cannot use: the message names it and says why (exit 2)."""


class FlashAttn(str, Enum):
    on = "on"
    off = "off"
    auto = "auto"


def read_header(path: str) -> GgufInfo:
    """The header of the GGUF file at `path`; FitError naming the file when it has none."""
    from checks.services.gguf_header import summary

    try:
        with open(path, "rb") as stream:
            info = summary(stream)
    except FileNotFoundError:
        raise FitError(f"{path}: no such file") from None
    except OSError as exc:
        raise FitError(f"{path}: cannot read it ({exc.strerror or type(exc).__name__})") from None
    if info is None:
        raise FitError(f"{path}: not a GGUF file, or its header is malformed or truncated")
    return info


def read_mmproj(path: str) -> GgufInfo:
    """The header of the multimodal projector at `path`; FitError when it is not one."""
    info = read_header(path)
    if info.architecture != "clip":
        arch = info.architecture or "none"
        raise FitError(f"--mmproj {path}: not a multimodal projector (architecture {arch})")
    if info.tensor_bytes is None:
        raise FitError(f"--mmproj {path}: a tensor type this version does not know")
    return info


def read_model(path: str) -> GgufInfo:
    """The header of the model at `path`; FitError naming the file when it has none we use."""
    info = read_header(path)
    if info.architecture == "clip":
        raise FitError(f"{path}: a multimodal projector, not a model (give it with --mmproj)")
    if info.split_count is not None and info.split_count > 1:
        raise FitError(
            f"{path}: one file of a split model ({info.split_count} files); its header holds "
            "only this file's tensors (merge it with llama-gguf-split --merge)"
        )
    if info.tensor_bytes is None:
        raise FitError(f"{path}: a tensor type this version does not know; weights unknown")
    return info


def parse_gpu(spec: str, index: int) -> Gpu:
    """`--gpu NAME[:MiB]`: the GPU's total memory from MiB, else from the GPU table."""
    from checks.facts import gpus
    from checks.facts.model import Gpu

    name, colon, size = spec.rpartition(":")
    if not colon:
        name = size
    name = name.strip()
    if colon:
        mib = int(size) if _NUMBER.fullmatch(size.strip()) else 0
        if mib <= 0 or not name:
            raise FitError(f"--gpu {spec!r}: give NAME:MiB with a name and a positive size")
        return Gpu(index=index, name=name, memory_total_mib=mib)
    model = gpus.lookup(name)
    if model is None:
        raise FitError(f"--gpu {spec!r}: not in the GPU table; give its memory as NAME:MiB")
    if model.memory_gib is None:
        raise FitError(
            f"--gpu {spec!r}: {model.name} comes in several memory sizes; give it as NAME:MiB"
        )
    return Gpu(index=index, name=model.name, memory_total_mib=model.memory_gib * 1024)


def sized(gpus: Sequence[Gpu], where: str) -> tuple[list[Gpu], str]:
    """`gpus` numbered in order, each with its total memory: as read, else the GPU table's
    nominal size (`where` then says so); FitError when neither says it."""
    from checks.facts import gpus as table

    out, nominal = [], []
    for i, gpu in enumerate(gpus):
        total = gpu.memory_total_mib
        if total is None:
            model = table.lookup(gpu.name)
            total = model.memory_gib * 1024 if model and model.memory_gib else None
            nominal.append(str(i))
        if total is None:
            raise FitError(
                f"{where}: GPU {i} ({gpu.name or 'unnamed'}) has no memory size; "
                "name it with --gpu NAME:MiB instead"
            )
        out.append(replace(gpu, index=i, memory_total_mib=total))
    return out, where + (f" (GPU {', '.join(nominal)}: {NOMINAL})" if nominal else "")


def host_gpus() -> tuple[list[Gpu], str]:
    """This host's GPUs from NVML, and what was read; none when NVML is absent or fails."""
    from checks.facts import nvml
    from checks.facts.probe import ProbeUnavailable

    try:
        facts = nvml.read()
    except ProbeUnavailable as exc:
        return [], f"no GPU read: {exc}"
    if facts.driver.nvml_error:
        return [], f"no GPU read: NVML: {facts.driver.nvml_error}"
    if not facts.gpus:
        return [], "no GPU on this host (NVML)"
    return sized(facts.gpus, "this host (NVML)")


@dataclass(frozen=True)
class Settings:
    """llama-server's settings as `fit` takes them; None is llama-server's default."""

    ctx: int
    parallel: int | None = None
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    flash_attn: str = "auto"
    ubatch: int | None = None
    gpu_layers: str | None = None
    cpu_moe: str | None = None  # --n-cpu-moe N, or "all" for --cpu-moe
    mmproj: str | None = None
    mmproj_offload: bool = True
    model_draft: str | None = None
    draft_gpu_layers: str | None = None
    draft_cache_type_k: str = "f16"
    draft_cache_type_v: str = "f16"


def claim_for(
    path: str,
    model: GgufInfo,
    settings: Settings,
    mmproj: GgufInfo | None = None,
    draft: GgufInfo | None = None,
) -> LlamaClaim:
    """The claim a llama-server started with these arguments makes, read as the gate reads a
    profile's arguments (llama-server's defaults where one is left out); `mmproj` and `draft`
    are the headers of the projector and draft model the settings name."""
    from checks.services import llama_server_args
    from provision import vram

    s = settings
    argv = ["-m", path, "-c", str(s.ctx), "-ctk", s.cache_type_k, "-ctv", s.cache_type_v]
    argv += ["-fa", s.flash_attn]
    if s.parallel is not None:
        argv += ["-np", str(s.parallel)]
    if s.ubatch is not None:
        argv += ["-ub", str(s.ubatch)]
    if s.gpu_layers is not None:
        argv += ["-ngl", s.gpu_layers]
    if s.cpu_moe == "all":
        argv += ["--cpu-moe"]
    elif s.cpu_moe is not None:
        argv += ["--n-cpu-moe", s.cpu_moe]
    argv += _extra_args(s)
    server = llama_server_args.server("fit", argv)
    return vram.llama_claim(_label(path), server, model, mmproj, draft)


def _extra_args(s: Settings) -> list[str]:
    """The projector's and draft model's arguments of the settings, as llama-server takes them."""
    argv = []
    if s.mmproj is not None:
        argv += ["--mmproj", s.mmproj] + ([] if s.mmproj_offload else ["--no-mmproj-offload"])
    if s.model_draft is not None:
        argv += ["-md", s.model_draft, "-ctkd", s.draft_cache_type_k]
        argv += ["-ctvd", s.draft_cache_type_v]
        argv += ["-ngld", s.draft_gpu_layers] if s.draft_gpu_layers is not None else []
    return argv


def _label(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1] or path


def fits(gpus: Sequence[Gpu], claim: LlamaClaim) -> bool:
    from provision import vram

    return vram.budget(gpus, [claim]).fits


def largest_ctx(gpus: Sequence[Gpu], claim: LlamaClaim, limit: int) -> int | None:
    """The largest --ctx up to `limit` whose estimate fits `gpus` (the estimate grows with the
    context, so a binary search finds it); None when not even a context of 1 fits."""
    if not gpus or limit < 1 or not fits(gpus, replace(claim, ctx_size=1)):
        return None
    low, high = 1, limit
    while low < high:
        mid = (low + high + 1) // 2
        if fits(gpus, replace(claim, ctx_size=mid)):
            low = mid
        else:
            high = mid - 1
    return low


@dataclass(frozen=True)
class Fit:
    """`gpuprov fit`: the estimate per part and per GPU, whether it fits, the largest context."""

    path: str
    model: GgufInfo
    claim: LlamaClaim
    share: LlamaShare
    gpus_from: str
    budget: Budget | None
    largest: int | None
    limit: int

    @property
    def fits(self) -> bool | None:
        return None if self.budget is None else self.budget.fits

    def settings(self) -> dict[str, Any]:
        c = self.claim
        ctx = c.ctx_size or self.model.context_length or 0
        return {
            "ctx": ctx,
            "parallel": c.parallel,
            "kv_unified": c.kv_unified,
            "cache_type_k": c.cache_type_k,
            "cache_type_v": c.cache_type_v,
            "flash_attn": c.flash_attn or "auto",
            "ubatch": c.n_ubatch,
            "n_gpu_layers": c.gpu_layers or "auto",
            "n_cpu_moe": "all" if c.cpu_moe_layers < 0 else c.cpu_moe_layers,
            "mmproj": c.mmproj or None,
            "mmproj_offload": c.mmproj_offload,
            "model_draft": c.draft or None,
            "draft_n_gpu_layers": c.draft_gpu_layers or "auto",
            "draft_cache_type_k": c.draft_cache_type_k,
            "draft_cache_type_v": c.draft_cache_type_v,
        }

    def to_json(self) -> dict[str, Any]:
        s, m = self.share, self.share.memory
        rows = self.budget.rows if self.budget else ()
        return {
            "schema_version": FIT_SCHEMA_VERSION,
            "model": {
                "path": self.path,
                "architecture": self.model.architecture,
                "block_count": self.model.block_count,
                "context_length": self.model.context_length,
            },
            "settings": self.settings(),
            "per_gpu": {
                "weights_mib": s.weights_mib,
                "kv_mib": s.kv_mib,
                "kv_layers": m.kv_layers,
                "swa_layers": m.swa_layers,
                "cells": m.cells,
                "recurrent_mib": s.rs_mib,
                "recurrent_layers": m.rs_layers,
                "compute_mib": s.compute_mib,
                "cuda_context_mib": s.cuda_mib,
                "total_mib": s.total_mib,
                "offloaded_layers": s.layers or None,
                "notes": [*m.notes, *s.notes],
                "mmproj": _part_json(s.mmproj),
                "draft": _part_json(s.draft),
            },
            "gpus_from": self.gpus_from,
            "gpus": [
                {
                    "index": r.index,
                    "name": r.name,
                    "total_mib": r.total_mib,
                    "held_mib": r.used_mib,
                    "free_mib": r.free_mib,
                }
                for r in rows
            ],
            "fits": self.fits,
            "problems": list(self.budget.problems) if self.budget else [],
            "largest_ctx": self.largest,
            "search_limit": self.limit,
        }


def _part_json(part: Part | None) -> dict[str, Any] | None:
    if part is None:
        return None
    return {
        "weights_mib": part.weights_mib,
        "kv_mib": part.kv_mib,
        "compute_mib": part.compute_mib,
        "total_mib": part.mib,
        "how": part.how,
        "not_counted": part.missing or None,
    }


def _part_lines(share: LlamaShare, n_gpus: int) -> list[str]:
    """The projector's and the draft model's lines of the per-GPU view."""
    from provision.vram import _size

    out = []
    for name, part in (("mmproj", share.mmproj), ("draft model", share.draft)):
        if part is not None:
            where = ", GPU 0 only" if name == "mmproj" and n_gpus > 1 and part.mib else ""
            out.append(f"  {name:<16} {_size(part.counted_mib):>10}  {part.how}{where}")
    return out


def lines(fit: Fit) -> list[str]:
    """The text view: model and settings, the parts one GPU holds, the GPU table, the verdict."""
    from provision.vram import _size

    m, s, c = fit.model, fit.share, fit.settings()
    mem = s.memory
    n = len(fit.budget.rows) if fit.budget else 1
    slots = f"{c['parallel']} slot{'s' if c['parallel'] != 1 else ''}"
    unified = ", unified" if c["kv_unified"] and c["parallel"] > 1 else ""
    out = [
        f"model     {printable(fit.path)}: {m.architecture or '?'}, {m.block_count} layers, "
        f"trained context {m.context_length or '?'}",
        f"settings  --ctx {c['ctx']} ({slots}{unified}), K {c['cache_type_k']} / V "
        f"{c['cache_type_v']}, flash attention {c['flash_attn']}, ubatch {c['ubatch']}, "
        f"--n-gpu-layers {c['n_gpu_layers']}"
        + (f" ({s.layers} on GPU)" if s.layers else "")
        + (f", --n-cpu-moe {c['n_cpu_moe']}" if c["n_cpu_moe"] else ""),
        "",
        "per GPU" + (f" (each of {n}: weights, KV and state split evenly)" if n > 1 else ""),
        f"  weights          {_size(s.weights_mib):>10}",
        f"  KV cache         {_size(s.kv_mib):>10}  {mem.kv_layers} layers"
        + (f" ({mem.swa_layers} sliding-window)" if mem.swa_layers else "")
        + f", {mem.cells} cells",
        f"  recurrent state  {_size(s.rs_mib):>10}  {mem.rs_layers} layers",
        f"  compute buffers  {_size(s.compute_mib):>10}",
        f"  CUDA context     {_size(s.cuda_mib):>10}",
        *_part_lines(s, n),
        f"  total            {_size(s.total_mib):>10}",
    ]
    if mem.notes or s.notes:
        out.append(f"  notes: {'; '.join([*mem.notes, *s.notes])}")
    out.append("")
    if fit.budget is None:
        out.append(f"GPUs: {fit.gpus_from}; nothing to fit against")
        return out
    out.append(f"GPUs from {fit.gpus_from}:")
    out += [printable(line) for line in fit.budget.lines()]
    out += [f"  {printable(p)}" for p in fit.budget.problems]
    out.append("")
    out.append("fits" if fit.fits else "DOES NOT FIT")
    if fit.largest is None:
        out.append("largest --ctx that fits: none (not even a context of 1)")
    elif fit.largest >= fit.limit:
        bound = "the model's trained context" if fit.model.context_length else "the search's limit"
        out.append(f"largest --ctx that fits: {fit.largest}, {bound} (larger not searched)")
    else:
        out.append(f"largest --ctx that fits: {fit.largest}")
    return out


def run(path: str, settings: Settings, gpu_specs: Sequence[str], sources: Sequence[str]) -> Fit:
    """Read, estimate and judge; FitError for input that cannot be used."""
    from provision import vram

    gpu_layers = settings.gpu_layers
    for flag, name in (
        ("--cache-type-k", settings.cache_type_k),
        ("--cache-type-v", settings.cache_type_v),
        ("--cache-type-k-draft", settings.draft_cache_type_k),
        ("--cache-type-v-draft", settings.draft_cache_type_v),
    ):
        if name.strip().lower() not in vram.KV_CACHE_TYPES:
            known = ", ".join(vram.KV_CACHE_TYPES)
            raise FitError(f"{flag} {name!r}: not a cache type llama.cpp takes ({known})")
    for flag, layers in (
        ("--n-gpu-layers", gpu_layers),
        ("--n-gpu-layers-draft", settings.draft_gpu_layers),
    ):
        if layers is not None and layers not in ("all", "auto") and not _NUMBER.fullmatch(layers):
            raise FitError(f"{flag} {layers!r}: a number, all or auto")
    if gpu_specs and sources:
        raise FitError("give --gpu or --from, not both")
    model = read_model(path)
    mmproj = read_mmproj(settings.mmproj) if settings.mmproj is not None else None
    draft = read_model(settings.model_draft) if settings.model_draft is not None else None
    claim = claim_for(path, model, settings, mmproj, draft)
    gpus, where = _gpus(gpu_specs, sources)
    share = vram.llama_share(claim, len(gpus))
    if isinstance(share, str):
        raise FitError(f"{path}: cannot estimate it: {share}")
    limit = max(model.context_length or SEARCH_LIMIT, 1)
    return Fit(
        path=path,
        model=model,
        claim=claim,
        share=share,
        gpus_from=where,
        budget=vram.budget(gpus, [claim]) if gpus else None,
        largest=largest_ctx(gpus, claim, limit),
        limit=limit,
    )


def _gpus(specs: Sequence[str], sources: Sequence[str]) -> tuple[list[Gpu], str]:
    if specs:
        named = [parse_gpu(spec, i) for i, spec in enumerate(specs)]
        nominal = [str(i) for i, spec in enumerate(specs) if ":" not in spec]
        return named, "--gpu" + (f" (GPU {', '.join(nominal)}: {NOMINAL})" if nominal else "")
    if sources:
        from checks.facts import capture

        try:
            facts = capture.load(sources)
        except capture.CaptureError as exc:
            raise FitError(str(exc)) from None
        where = "--from " + " ".join(sources)
        if not facts.gpus:
            raise FitError(f"{where}: no GPU in the captures; name one with --gpu NAME[:MiB]")
        return sized(facts.gpus, where)
    return host_gpus()


def fit(
    model: Annotated[str, typer.Argument(help="The GGUF file (one file, not a split model).")],
    ctx: Annotated[
        int,
        typer.Option("--ctx", min=0, help="--ctx-size: total over the slots (0: the model's)."),
    ],
    parallel: Annotated[
        int | None,
        typer.Option("--parallel", min=1, help="Slots (default: llama-server's auto, 4 unified)."),
    ] = None,
    cache_type_k: Annotated[str, typer.Option("--cache-type-k", help="K cache type.")] = "f16",
    cache_type_v: Annotated[str, typer.Option("--cache-type-v", help="V cache type.")] = "f16",
    flash_attn: Annotated[
        FlashAttn, typer.Option("--flash-attn", help="Flash attention.")
    ] = FlashAttn.auto,
    ubatch: Annotated[
        int | None, typer.Option("--ubatch", min=1, help="--ubatch-size (default 512).")
    ] = None,
    gpu_layers: Annotated[
        str | None,
        typer.Option("--n-gpu-layers", help="Layers on the GPUs: a number or all (default)."),
    ] = None,
    cpu_moe: Annotated[
        str | None,
        typer.Option(
            "--n-cpu-moe",
            help="Keep the experts of the first N layers in RAM (all: --cpu-moe).",
            metavar="N|all",
        ),
    ] = None,
    mmproj: Annotated[
        str | None,
        typer.Option("--mmproj", help="A multimodal projector it loads.", metavar="FILE"),
    ] = None,
    no_mmproj_offload: Annotated[
        bool,
        typer.Option("--no-mmproj-offload", help="Keep the projector in RAM, off the GPU."),
    ] = False,
    model_draft: Annotated[
        str | None,
        typer.Option(
            "--model-draft", help="A draft model for speculative decoding.", metavar="FILE"
        ),
    ] = None,
    draft_gpu_layers: Annotated[
        str | None,
        typer.Option("--n-gpu-layers-draft", help="Draft model layers on the GPUs (default all)."),
    ] = None,
    draft_cache_type_k: Annotated[
        str, typer.Option("--cache-type-k-draft", help="Draft K cache type.")
    ] = "f16",
    draft_cache_type_v: Annotated[
        str, typer.Option("--cache-type-v-draft", help="Draft V cache type.")
    ] = "f16",
    gpu: Annotated[
        list[str] | None,
        typer.Option(
            "--gpu",
            help="A GPU to fit in, sized from the GPU table or as NAME:MiB (repeatable).",
            metavar="NAME[:MiB]",
        ),
    ] = None,
    from_: Annotated[
        list[str] | None,
        typer.Option("--from", help="Fit in the GPUs of these captures.", metavar="FILE..."),
    ] = None,
    json_: Annotated[bool, typer.Option("--json", help="Print JSON (versioned schema).")] = False,
) -> None:
    """Estimate the GPU memory llama-server needs for a model and settings, and whether it fits.

    Exit 0 when it fits (or there is no GPU to fit in), 1 when it does not, 2 for bad input.
    """
    try:
        if cpu_moe is not None and cpu_moe != "all" and not cpu_moe.isdigit():
            raise FitError(f"--n-cpu-moe: {cpu_moe!r} is neither a number of layers nor all")
        settings = Settings(
            ctx,
            parallel,
            cache_type_k,
            cache_type_v,
            flash_attn.value,
            ubatch,
            gpu_layers,
            cpu_moe,
            mmproj=mmproj,
            mmproj_offload=not no_mmproj_offload,
            model_draft=model_draft,
            draft_gpu_layers=draft_gpu_layers,
            draft_cache_type_k=draft_cache_type_k,
            draft_cache_type_v=draft_cache_type_v,
        )
        result = run(model, settings, gpu or [], from_ or [])
    except FitError as exc:
        print(f"gpuprov: {printable(str(exc))}", file=sys.stderr)
        raise typer.Exit(2) from None
    if json_:
        emit(result, as_json=True)
    else:
        print("\n".join(lines(result)))
    if result.fits is False:
        raise typer.Exit(1)
