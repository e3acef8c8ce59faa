"""The recommendations, the gate and the findings never contradict each other.

Over every facts fixture the repository has (rule fixtures, the gate's stack fixtures, recorded
parser cases, the third-party captures in real/ and this project's own captures): an nvcc the
recommendation or the gate calls good is never the subject of an error finding, and a host whose
driver is installed but broken is never taken for a host without a GPU.
"""

from __future__ import annotations

import copy
import importlib
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.version import Version

from checks.facts import capture, gpus
from checks.facts.gather import all_probes
from checks.facts.model import HostFacts, Toolkit, from_dict
from checks.matrix import engine, registry, toolkits
from checks.matrix.host import toolkit_label
from checks.reporting import recommend
from provision import gate, stack
from tests.conftest import FIXTURES, PROBE_CASES, REAL, load_case

MAIN = {"name": "main", "model": "/srv/models/m.gguf", "port": 8080}


def _probe_output(path: Path) -> HostFacts:
    """A capture of one gpuprov probe's output ("probe_<name>__...", or "probe__..." in the
    probe's own folder), read by that probe; anything else holds no facts."""
    match = re.match(r"probe_([\w-]*)__", path.name)
    if match is None:
        return HostFacts()
    name = match.group(1) or path.parent.name
    (probe,) = [p for p in all_probes() if p.name == name]
    return probe.parse(path.read_text(errors="replace"))


def _all_facts() -> Iterator[tuple[str, HostFacts]]:
    for path in sorted(FIXTURES.glob("rules/*/*.json")) + sorted(FIXTURES.glob("stack/*.json")):
        yield (
            str(path.relative_to(FIXTURES)),
            from_dict(HostFacts, json.loads(path.read_text())["facts"]),
        )
    for path in sorted(PROBE_CASES.glob("*/*.json")):
        case = load_case(path)
        module = importlib.import_module(f"checks.facts.parsers.{path.parent.name}")
        yield str(path.relative_to(FIXTURES)), getattr(module, case["parser"])(case["text"])
    for path in sorted(REAL.iterdir()) + sorted(FIXTURES.glob("captures/*/*")):
        if path.name == "MANIFEST.tsv":
            continue
        try:
            facts = capture.load([str(path)])
        except capture.CaptureError:
            facts = _probe_output(path)
        yield str(path.relative_to(FIXTURES)), facts


FACTS = [(name, gpus.enrich(facts)) for name, facts in _all_facts()]
IDS = [name for name, _ in FACTS]


def _errors_about(facts: HostFacts) -> set[str]:
    return {f.subject for f in engine.evaluate(facts, route="host") if f.severity == "error"}


def _installed(release: str, update: bool = True) -> Toolkit:
    """CUDA `release` (a table entry, 12.9.1) installed under /usr/local, as the gate would."""
    v = Version(release)
    short = f"{v.major}.{v.minor}"
    if update:
        return Toolkit(path=f"/usr/local/cuda-{release}/bin/nvcc", release=short, update=release)
    # nvcc's banner alone: its own version, which does not tell the toolkit update
    return Toolkit(path=f"/opt/cuda-{release}/bin/nvcc", release=short, version=f"{short}.99")


def test_the_corpus_holds_the_cases_that_matter() -> None:
    """The fixtures cover installed toolkits, GPUs with a driver, and broken drivers."""
    assert len(FACTS) > 150
    assert sum(bool(f.toolkits and f.gpus and f.driver.version) for _, f in FACTS) >= 5
    assert sum(recommend.broken_driver(f) is not None for _, f in FACTS) >= 5
    assert any(name.startswith("real/") and recommend.broken_driver(f) for name, f in FACTS)


@pytest.mark.parametrize(("name", "facts"), FACTS, ids=IDS)
def test_good_toolkits_are_never_an_error_subject(name: str, facts: HostFacts) -> None:
    errors = _errors_about(facts)
    for toolkit in recommend.good_toolkits(facts):
        assert toolkit_label(toolkit) not in errors, (name, toolkit)


@pytest.mark.parametrize(("name", "facts"), FACTS, ids=IDS)
def test_the_recommended_and_installed_nvcc_is_never_an_error_subject(
    name: str, facts: HostFacts
) -> None:
    """What the recommendation and the gate would install, once installed, no rule reports."""
    release = recommend.build_release(facts)
    if not re.fullmatch(r"\d+\.\d+(\.\d+)?", release):
        return
    installed = copy.deepcopy(facts)
    installed.toolkits.append(_installed(release))
    assert toolkit_label(installed.toolkits[-1]) not in _errors_about(installed), (name, release)
    rec = recommend.nvcc(facts)
    assert rec.value == f"CUDA {release}", rec


@pytest.mark.parametrize(("name", "facts"), FACTS, ids=IDS)
def test_the_gate_builds_only_with_a_good_nvcc(name: str, facts: HostFacts) -> None:
    verdict = gate.judge("box", facts, stack.from_data({"llama_server_profiles": [MAIN]}))
    errors = {f.subject for f in verdict.findings if f.severity == "error"}
    chosen = next((t for t in facts.toolkits if t.path and t.path == verdict.nvcc), None)
    if chosen is not None:
        assert toolkits.good(facts, chosen), (name, chosen)
        assert toolkit_label(chosen) not in errors, (name, chosen)
    if verdict.install_cuda:
        assert verdict.install_cuda == ".".join(recommend.build_release(facts).split(".")[:2])


@pytest.mark.parametrize(("name", "facts"), FACTS, ids=IDS)
def test_every_release_is_judged_as_the_rules_judge_it(name: str, facts: HostFacts) -> None:
    """Every CUDA release of the table installed on this host (with its update known, and as
    nvcc's banner alone): the good ones draw no error, and each rule against one reports it."""
    every = copy.deepcopy(facts)
    every.toolkits = [
        _installed(str(release), update)
        for release, _ in registry.cuda_releases()
        for update in (True, False)
    ]
    found = engine.evaluate(every, route="host")
    for toolkit in every.toolkits:
        label = toolkit_label(toolkit)
        reported = {f.rule for f in found if f.subject == label and f.severity == "error"}
        against = set(toolkits.faults(every, *toolkits.toolkit_version(toolkit)))
        assert reported == against - {"table:archs"}, (name, label)


@pytest.mark.parametrize(("name", "facts"), FACTS, ids=IDS)
def test_a_broken_driver_is_never_no_gpu(name: str, facts: HostFacts) -> None:
    fault = recommend.broken_driver(facts)
    findings = engine.evaluate(facts, route="host")
    if fault is None:
        return
    assert fault.rule in {f.rule for f in findings}
    assert "GPU-001" not in {f.rule for f in findings}
    for rec in recommend.recommend(facts):
        assert (rec.value, rec.basis) == (recommend.WAIT_FOR_DRIVER, (fault.rule,)), rec
    verdict = gate.judge("box", facts, stack.from_data({"llama_server_profiles": [MAIN]}))
    assert verdict.plan is None and verdict.blocked
    assert fault.rule in verdict.problems[0]


def _fixture(name: str) -> HostFacts:
    return from_dict(HostFacts, json.loads((FIXTURES / f"{name}.json").read_text())["facts"])


def _judge(facts: HostFacts, **data: object) -> gate.HostGate:
    return gate.judge("box", facts, stack.from_data({"llama_server_profiles": [MAIN], **data}))


def test_the_gate_passes_over_an_nvcc_the_driver_cannot_run() -> None:
    """nvcc 13.0 on driver 575.57.08 (CUDA 13 needs 580.65.06) and an RTX 4090: DRV-001 reports
    it, so the gate installs CUDA 12.9 and builds with that instead."""
    facts = _fixture("stack/rtx4090-driver575-cuda13.0")
    verdict = _judge(facts)
    drv_001 = [f.subject for f in verdict.findings if f.rule == "DRV-001"]
    assert drv_001 == ["CUDA toolkit /usr/local/cuda-13.0/bin/nvcc"]
    assert (verdict.nvcc, verdict.install_cuda) == ("/usr/local/cuda-12.9/bin/nvcc", "12.9")
    assert verdict.plan is not None and verdict.plan.archs == ("89",)
    assert "-DCMAKE_CUDA_COMPILER=/usr/local/cuda-12.9/bin/nvcc" in verdict.plan.cmake_args


@pytest.mark.parametrize(
    ("facts", "rule"),
    [
        (capture.load([str(REAL / "err_nvml-mismatch__tinygrad-ogkm-47.txt")]), "DRV-003"),
        (_fixture("rules/DRV-007/fail"), "DRV-007"),
        (_fixture("rules/HOST-001/fail"), "HOST-001"),
    ],
    ids=["nvml-mismatch-capture", "DRV-007", "HOST-001"],
)
def test_the_gate_plans_no_cpu_only_build_on_a_broken_driver(facts: HostFacts, rule: str) -> None:
    verdict = _judge(facts)
    assert verdict.plan is None and verdict.blocked
    (problem,) = verdict.problems
    assert problem.startswith(f"the NVIDIA driver is broken ({rule}: ")
    assert "CPU-only build would be wrong" in problem and "llama_cpp_cuda_architectures" in problem
    assert "GPU-001" not in {f.rule for f in verdict.findings}


def test_pinned_architectures_build_for_the_gpus_on_a_broken_driver() -> None:
    facts = _fixture("rules/DRV-007/fail")
    pinned = _judge(
        facts, llama_cpp_cuda_architectures="89", llama_cpp_cuda_compiler="/opt/cuda/bin/nvcc"
    )
    assert pinned.plan is not None and (pinned.plan.archs, pinned.plan.cuda) == (("89",), True)
    assert pinned.problems == []
    # without an nvcc to build with, the gate still waits for the driver to pick one
    (problem,) = _judge(facts, llama_cpp_cuda_architectures="89").problems
    assert problem.startswith("no CUDA toolkit to build with: unknown until the driver works")
