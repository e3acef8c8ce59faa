"""From a scanned log to findings: the rule each signature is evidence for, with facts applied.

Facts come from the log itself (an nvidia-smi header, device lines, collect_env, image tags) and,
when given, from the host. A signature's variants name the facts they need; the most specific one
whose facts are known (and whose `when` holds) words the message and the fix. A signature's
`unless` names a condition on those facts that rules its cause out: then it gives no finding.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from packaging.version import Version

from checks import coverage, versions
from checks.facts import capture, gpus
from checks.facts.model import HostFacts, merge
from checks.logs import logscan
from checks.logs.logscan import Hit, Scan, Variant
from checks.matrix import registry
from checks.matrix.host import host_driver, host_driver_cuda
from checks.services import vllm_images

_IMAGE_CUDA = re.compile(r"(?:cuda|CUDA)[-_:]?(\d{2})\.?(\d)(?:\.(\d))?|cu(\d{2})(\d)\b")


@dataclass(frozen=True)
class Diagnosis:
    """One finding from a log: the rule, what the log shows, the cause and the fix."""

    rule: str
    severity: str
    title: str
    signature: str
    score: int
    message: str
    cause: str
    fix: str
    citations: tuple[str, ...]
    evidence: tuple[tuple[int, str], ...]
    count: int


@functools.cache
def _image() -> re.Pattern[str]:
    """A reference to an image of one of the repositories in tables/log_images.toml."""
    names = "|".join(re.escape(n) for n in registry.table("log_images")["repositories"])
    # Starting only where a word begins keeps the search linear: from inside a run of name
    # characters, (?:[\w.-]+/)* would rescan the rest of the run at every position.
    return re.compile(rf"(?<![\w./-])(?P<ref>(?:[\w.-]+/)*(?:{names})[\w.-]*:[\w.+-]+)")


def _image_facts(text: str) -> dict[str, str]:
    """The first container image the log names, and the CUDA its tag says it was built on.

    A vLLM release tag (vllm/vllm-openai:v0.9.0) names its CUDA through the vllm_images table.
    """
    match = _image().search(text)
    if match is None:
        return {}
    ref = match.group("ref")
    out = {"image": ref}
    repo, tag = ref.rsplit(":", 1)
    if repo.endswith("/cuda") or repo == "cuda":
        base = re.match(r"(\d+\.\d+)", tag)
        if base is not None:
            out["image_cuda"] = base.group(1)
        return out
    vllm_cuda = vllm_images.cuda_of_ref(ref)
    if vllm_cuda is not None:
        out["image_cuda"] = vllm_cuda
        return out
    cuda = _IMAGE_CUDA.search(tag)
    if cuda is not None:
        if cuda.group(1):
            out["image_cuda"] = f"{cuda.group(1)}.{cuda.group(2)}"
        else:
            out["image_cuda"] = f"{cuda.group(4)}.{cuda.group(5)}"
    return out


def log_facts(scan: Scan) -> HostFacts:
    """Facts the log states about its host, read by the same parsers as `--from`."""
    return capture.recognise("\n".join(scan.fact_text) + "\n")[0]


def context(facts: HostFacts, groups: Mapping[str, str], text: str) -> dict[str, str]:
    """Named values for messages: the facts that matter, the signature's groups, derived minima."""
    ctx: dict[str, str] = {}
    driver = host_driver(facts)
    if driver is not None:
        ctx["driver"] = driver[0]
    driver_cuda = host_driver_cuda(facts)
    if driver_cuda is not None:
        ctx["driver_cuda"] = str(driver_cuda)
    if facts.gpus:
        gpu = facts.gpus[0]
        if gpu.name:
            ctx["gpu"] = gpu.name
        if gpu.brand_class:
            ctx["brand_class"] = gpu.brand_class
        if gpu.compute_capability:
            ctx["cc"] = gpu.compute_capability
            ctx["sm"] = gpu.compute_capability.replace(".", "")
        if all(g.compute_capability for g in facts.gpus):
            ctx["ccs"] = " ".join(str(g.compute_capability) for g in facts.gpus)
    for package in facts.python:
        if package.name == "torch" and package.version:
            ctx["torch"] = package.version
        if package.name == "torch" and package.cuda_archs:
            ctx["torch_archs"] = " ".join(package.cuda_archs)
        elif package.name == "torch" and package.version and package.cuda_version:
            listed = registry.torch_targets(package.version, Version(package.cuda_version))
            if listed is not None:
                ctx["torch_archs"] = coverage.describe(coverage.from_versions(*listed))
    cc = coverage.cc_tuple(ctx.get("cc"))
    if cc is not None:
        wheel = registry.torch_wheel_for([cc], driver_cuda)
        if wheel is not None:
            ctx["torch_index"] = registry.torch_index_url(wheel)
        info = registry.arch_info(f"{cc[0]}.{cc[1]}")
        ctx["cmake"] = info["cmake"] if info else f"{cc[0]}{cc[1]}"
    for toolkit in facts.toolkits:
        if toolkit.release:
            ctx.setdefault("nvcc", toolkit.update or toolkit.version or toolkit.release)
    ctx.update(_image_facts(text))
    ctx.update({k: v for k, v in groups.items() if v})
    arch = re.fullmatch(r"compute_(\d+)(\d)[af]?", ctx.get("arch", ""))
    if arch is not None:
        info = registry.arch_info(f"{int(arch.group(1))}.{arch.group(2)}")
        if info is not None:
            ctx["arch_first_cuda"] = info["first_cuda"]
    for key in [k for k in ctx if k.endswith("_cuda")]:
        minimum = registry.cuda_minimum_driver(Version(str(versions.release(ctx[key]) or "0.0")))
        if minimum is not None:
            ctx[key[: -len("_cuda")] + "_minimum"] = str(minimum)
    return ctx


_JETSON = re.compile(r"\b(?:Jetson|Orin|Xavier|Tegra|Thor)\b")


def _arch_in_list(ctx: Mapping[str, str]) -> bool:
    arch = ctx.get("arch", "").strip("'\" ")
    listed = re.findall(r"[\w.]+", ctx.get("supported", ""))
    return bool(arch) and arch in listed


def _driver_below(ctx: Mapping[str, str], branch: str) -> bool:
    driver, limit = versions.driver(ctx.get("driver")), versions.driver(branch)
    return driver is not None and limit is not None and driver < limit


PREDICATES: dict[str, Callable[[Mapping[str, str]], bool]] = {
    "arch_in_list": _arch_in_list,
    "not_arch_in_list": lambda ctx: not _arch_in_list(ctx),
    "consumer_gpu": lambda ctx: ctx.get("brand_class") == "consumer",
    "vllm_image": lambda ctx: "vllm" in ctx.get("image", ""),
    "gb10_nvcc_13_0": lambda ctx: (
        ctx.get("cc") == "12.1" and ctx.get("nvcc", "").startswith("13.0")
    ),
    "driver_below_550": lambda ctx: _driver_below(ctx, "550.0"),
    "driver_below_525": lambda ctx: _driver_below(ctx, "525.0"),
    "jetson_gpu": lambda ctx: bool(_JETSON.search(ctx.get("gpu", ""))),
    "ollama_binary": lambda ctx: "ollama" in ctx.get("binary", "").lower(),
    "site_turboquant": lambda ctx: "turboquant" in ctx.get("site", "").lower(),
    "site_modular_kernel": lambda ctx: "modular_kernel" in ctx.get("site", ""),
    # Every GPU the log lists counts: one Turing card beside newer ones still needs sm_75.
    "cc_7_5": lambda ctx: (7, 5) in _ccs(ctx),
    "cc_above_7_5": lambda ctx: bool(_ccs(ctx)) and min(_ccs(ctx)) > (7, 5),
    "cc_below_8_0": lambda ctx: bool(_ccs(ctx)) and min(_ccs(ctx)) < (8, 0),
    "cc_below_7_5": lambda ctx: bool(_ccs(ctx)) and min(_ccs(ctx)) < (7, 5),
    "cc_below_7_0": lambda ctx: bool(_ccs(ctx)) and min(_ccs(ctx)) < (7, 0),
    "cc_at_least_7_0": lambda ctx: bool(_ccs(ctx)) and min(_ccs(ctx)) >= (7, 0),
    "hopper_gpus": lambda ctx: bool(_ccs(ctx)) and set(_ccs(ctx)) == {(9, 0)},
}


def _ccs(ctx: Mapping[str, str]) -> list[tuple[int, int]]:
    """The compute capabilities of every GPU the log names; empty unless all are known."""
    found = [coverage.cc_tuple(cc) for cc in ctx.get("ccs", "").split()]
    return [cc for cc in found if cc is not None] if None not in found else []


class _Fill(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "unknown"


def _variant(hit: Hit, ctx: Mapping[str, str]) -> Variant | None:
    """The first variant whose facts are all known and whose condition holds."""
    for variant in hit.signature.variants:
        if all(ctx.get(need) for need in variant.needs) and (
            variant.when is None or PREDICATES[variant.when](ctx)
        ):
            return variant
    return None


def diagnose(scan: Scan, host: HostFacts | None = None) -> list[Diagnosis]:
    """Findings for a scanned log: causes above the symptoms they explain, then most specific."""
    facts = log_facts(scan)
    if host is not None:
        merge(facts, host)
    facts = gpus.enrich(facts)
    text = "\n".join(scan.fact_text)
    out = []
    for hit in scan.hits.values():
        evidence_text = text + "\n" + "\n".join(line for _, line in hit.evidence)
        ctx = context(facts, hit.groups, evidence_text)
        if hit.signature.unless is not None and PREDICATES[hit.signature.unless](ctx):
            continue
        variant = _variant(hit, ctx)
        rule = registry.rule(
            (variant.rule if variant and variant.rule else None) or hit.signature.rule
        )
        if rule is None:
            continue
        fill = _Fill(ctx)
        message = (variant.message if variant else hit.signature.message).format_map(fill)
        fix = (variant.fix if variant and variant.fix else hit.signature.fix).format_map(fill)
        score = hit.signature.specificity + (10 * (1 + len(variant.needs)) if variant else 0)
        out.append(
            Diagnosis(
                rule=rule.id,
                severity=rule.severity,
                title=rule.title,
                signature=hit.signature.id,
                score=score,
                message=message,
                cause=" ".join(rule.why.split()),
                fix=fix,
                citations=rule.citations,
                evidence=tuple(hit.evidence),
                count=hit.count,
            )
        )
    out.sort(key=lambda d: (-d.score, d.evidence[0][0] if d.evidence else 0))
    known = {s.id: s for s in logscan.signatures()}
    known.update({hit.signature.id: hit.signature for hit in scan.hits.values()})
    return _dedupe(rank(out, logscan.explained_by_closure(tuple(known.values()))))


def rank(diagnoses: list[Diagnosis], explained_by: Mapping[str, frozenset[str]]) -> list[Diagnosis]:
    """`diagnoses` (best first) reordered so that no finding comes before one that explains it.

    A cause takes the place of the best-placed symptom it explains, whatever their scores; the
    order is otherwise kept. `explained_by` is acyclic (signatures() refuses cycles).
    """
    left = list(diagnoses)
    out = []
    while left:
        pick = left[0]
        for _ in range(len(left)):
            causes = explained_by.get(pick.signature, frozenset())
            cause = next((d for d in left if d.signature in causes), None)
            if cause is None:
                break
            pick = cause
        out.append(pick)
        left.remove(pick)
    return out


def _dedupe(diagnoses: list[Diagnosis]) -> list[Diagnosis]:
    """One finding per rule: the most specific signature speaks for it."""
    seen: set[str] = set()
    out = []
    for diagnosis in diagnoses:
        if diagnosis.rule not in seen:
            seen.add(diagnosis.rule)
            out.append(diagnosis)
    return out
