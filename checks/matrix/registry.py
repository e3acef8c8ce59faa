"""The known-bad matrix as data: rules in matrix/rules/*.toml, tables in matrix/tables/*.toml."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

from packaging.version import Version

from checks import coverage, packaged, versions

SEVERITIES = ("error", "warning", "info")
RULES_SCHEMA_VERSION = 1  # `gpuprov rules --json`
# What can detect a rule (its `detected_by`): every route but "logs" runs the rule's evaluator.
ROUTES = {
    "host": "`gpuprov check` and the gate, on the host's probed facts",
    "planned-build": "the gate, on the llama.cpp build it plans",
    "planned-services": "the gate, on the planned vLLM replicas and llama-server profiles",
    "image": "the image preflight, on a container image before it runs (plan; apply after a pull)",
    "logs": "`gpuprov explain`, through a log signature",
}
LOGS = "logs"


@dataclass(frozen=True)
class Variant:
    """The wording for one case an evaluator reports (a match's "case")."""

    case: str
    message: str | None = None
    fix: str | None = None


@dataclass(frozen=True)
class Rule:
    """One matrix rule; `check` names its evaluator (None when only logs detect it)."""

    id: str
    title: str
    severity: str
    message: str
    fix: str
    why: str
    citations: tuple[str, ...]
    detected_by: tuple[str, ...] = ()
    check: str | None = None
    fixed_by: str | None = None
    symptoms: tuple[str, ...] = ()
    params: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    variants: tuple[Variant, ...] = ()
    area: str = ""

    def variant(self, case: str | None) -> Variant | None:
        """The wording for `case`, or None for the rule's own message and fix."""
        return next((v for v in self.variants if v.case == case), None)

    def docs(self) -> str:
        """The rule's documentation as Markdown: what, why, what you see, fix, sources."""
        lines = [f"# {self.id}: {self.title}", "", f"Severity: {self.severity}", ""]
        lines += [f"Detected by: {', '.join(self.detected_by)}", ""]
        if self.fixed_by:
            lines += [f"Fixed by: the {self.fixed_by} role", ""]
        lines += ["## Why", "", self.why.strip(), ""]
        if self.symptoms:
            lines += ["## What you see", ""] + [f"    {s}" for s in self.symptoms] + [""]
        fix = re.sub(r"\{(\w+)\}", r"<\1>", self.fix.strip())
        lines += ["## Fix", "", fix, "", "## Sources", ""]
        lines += [f"- {c}" for c in self.citations]
        return "\n".join(lines) + "\n"


def _rule(area: str, raw: dict[str, Any]) -> Rule:
    return Rule(
        id=raw["id"],
        title=raw["title"],
        severity=raw["severity"],
        message=raw["message"],
        fix=raw["fix"],
        why=raw["why"],
        citations=tuple(raw["citations"]),
        detected_by=tuple(raw.get("detected_by", ())),
        check=raw.get("check"),
        fixed_by=raw.get("fixed_by"),
        symptoms=tuple(raw.get("symptoms", ())),
        params=raw.get("params", {}),
        variants=tuple(
            Variant(case=v["case"], message=v.get("message"), fix=v.get("fix"))
            for v in raw.get("variant", ())
        ),
        area=area,
    )


@functools.cache
def rules() -> tuple[Rule, ...]:
    """Every rule, ordered by ID."""
    out = [
        _rule(area, raw)
        for area, content in packaged.toml_folder("checks.matrix", "rules")
        for raw in content["rule"]
    ]
    return tuple(sorted(out, key=lambda r: r.id))


def routed(route: str) -> tuple[Rule, ...]:
    """The rules `route` detects."""
    return tuple(r for r in rules() if route in r.detected_by)


def fixed_by(role: str) -> tuple[str, ...]:
    """The IDs of the rules the role `role` fixes when it runs."""
    return tuple(r.id for r in rules() if r.fixed_by == role)


def areas() -> dict[str, dict[str, Any]]:
    """Each area (a rules file's stem): its ID `prefixes` and its `title`."""
    return table("areas")


def area_title(area: str) -> str:
    """The title reports show for `area`; the stem itself when the area is not listed."""
    return str(areas().get(area, {}).get("title", area))


def rule(rule_id: str) -> Rule | None:
    """The rule with this ID (case-insensitive), or None."""
    wanted = rule_id.strip().upper()
    return next((r for r in rules() if r.id == wanted), None)


@functools.cache
def table(name: str) -> dict[str, Any]:
    """A data table from checks/matrix/tables/<name>.toml."""
    return packaged.read_toml("checks.matrix", "tables", f"{name}.toml")


def cuda_releases() -> list[tuple[Version, versions.DriverVersion]]:
    """(CUDA release, minimum driver) pairs, oldest first."""
    pairs = [
        (Version(cuda), versions.driver(drv)) for cuda, drv in table("cuda")["releases"].items()
    ]
    return sorted((c, d) for c, d in pairs if d is not None)


def release_minimum(cuda: Version) -> versions.DriverVersion | None:
    """The driver the X.Y release of `cuda` ships with (its GA minimum)."""
    wanted = Version(f"{cuda.major}.{cuda.minor}")
    for release, minimum in cuda_releases():
        if Version(f"{release.major}.{release.minor}") == wanted:
            return minimum
    return None


def family_minimum(cuda: Version) -> versions.DriverVersion | None:
    """The oldest driver of `cuda`'s major family (minor-version compatibility)."""
    value = table("cuda")["family_minimum"].get(str(cuda.major))
    return versions.driver(value) if value else None


def driver_cuda(driver: Version) -> Version | None:
    """The newest CUDA X.Y whose GA driver minimum `driver` meets."""
    best = None
    for release, minimum in cuda_releases():
        if driver >= minimum:
            best = Version(f"{release.major}.{release.minor}")
    return best


def cuda_minimum_driver(cuda: Version) -> versions.DriverVersion | None:
    """The driver needed for CUDA X.Y, falling back to the family minimum for unknown releases."""
    return release_minimum(cuda) or family_minimum(cuda)


def arch_info(cc: str) -> dict[str, str] | None:
    """first_cuda / last_cuda / cmake for a compute capability, from archs.toml."""
    info: dict[str, str] | None = table("archs")["compute_capability"].get(cc)
    return info


def torch_targets(torch_version: str, cuda: Version) -> tuple[list[str], list[str]] | None:
    """(sass, ptx) compute capabilities of the PyTorch wheel `torch_version` for CUDA X.Y."""
    from packaging.specifiers import SpecifierSet  # only here: it costs start-up time

    base = versions.parse(torch_version.split("+")[0])
    if base is None:
        return None
    for wheel in table("torch_wheels")["wheel"]:
        if Version(wheel["cuda"]) == Version(f"{cuda.major}.{cuda.minor}") and base in SpecifierSet(
            wheel["torch"]
        ):
            return list(wheel["sass"]), list(wheel.get("ptx", []))
    return None


def torch_wheel_for(
    ccs: list[tuple[int, int]], driver_cuda: Version | None
) -> dict[str, Any] | None:
    """The newest PyTorch wheel that covers every compute capability and that the driver runs."""
    newest_first = sorted(
        table("torch_wheels")["wheel"], key=lambda w: Version(w["cuda"]), reverse=True
    )
    for wheel in newest_first:
        targets = coverage.from_versions(wheel["sass"], wheel.get("ptx", []))
        if not all(coverage.covers(targets, cc) for cc in ccs):
            continue
        if driver_cuda is None or Version(wheel["cuda"]) <= driver_cuda:
            return dict(wheel)
    return None


def torch_index_url(wheel: dict[str, Any]) -> str:
    return "https://download.pytorch.org/whl/cu" + str(wheel["cuda"]).replace(".", "")


@functools.cache
def _jetson_gpu_names() -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.IGNORECASE) for p in table("jetson")["integrated_gpu"])


def jetson_integrated(name: str | None) -> bool:
    """Whether a GPU name is a Jetson's integrated GPU, as tables/jetson.toml spells them."""
    return bool(name) and any(p.search(name or "") for p in _jetson_gpu_names())


def _is_l4t(entry: str, l4t: str) -> bool:
    """Whether L4T release `l4t` (36.4.3) is the table's `entry`: "36.4", or a whole major "35"."""
    return l4t == entry or l4t.startswith(entry + ".")


def jetson_release(l4t: str | None, jetpack: str | None) -> dict[str, Any] | None:
    """What tables/jetson.toml says of a Jetson: the row of its L4T release (36.4.3), else of its
    JetPack name (6.2) when no L4T release was read, over its family's fields (the family's
    `name` as "family_name"); None when neither is in the table."""
    data = table("jetson")
    if l4t:
        row = next((r for r in data["release"] if any(_is_l4t(e, l4t) for e in r["l4t"])), None)
    elif jetpack:
        row = next((r for r in data["release"] if jetpack in r["jetpack"]), None)
    else:
        row = None
    if row is None:
        return None
    family = data["family"][row["family"]]
    return {**family, "family_name": family["name"], **row}
