"""BUILD-004 on probed facts: an nvcc the host's gcc is too new for is never picked to build with,
and a CUDA release the host-compiler table does not list is never judged."""

from __future__ import annotations

import copy
import json

import pytest
from packaging.version import Version

from checks.facts.model import HostFacts, from_dict
from checks.matrix import engine, toolkits
from checks.reporting import recommend
from provision import gate, stack
from tests.conftest import FIXTURES

MAIN = {"name": "main", "model": "/srv/models/m.gguf", "port": 8080}


def _facts(name: str) -> HostFacts:
    return from_dict(HostFacts, json.loads((FIXTURES / f"{name}.json").read_text())["facts"])


@pytest.mark.parametrize(
    ("nvcc", "gcc", "limit"),
    [
        ("12.1.105", "13.2.0", 12),  # instant-ngp#1562
        ("12.1", "12.3.0", None),  # at the limit: accepted
        ("13.2.2", "16.1.1", 15),
        ("12.6.85", "16.1.1", None),  # 12.6 is not in the table: unknown
        ("12.1.105", None, None),
        ("12.1.105", "clang version 18", None),
        (None, "16.1.1", None),
    ],
)
def test_rejected_gcc(nvcc: str | None, gcc: str | None, limit: int | None) -> None:
    assert toolkits.rejected_gcc(nvcc, gcc) == limit


def test_every_row_of_the_table_is_a_cuda_release() -> None:
    """A row for a release the CUDA table lacks would never be judged."""
    from checks.matrix import registry

    known = {Version(f"{r.major}.{r.minor}") for r, _ in registry.cuda_releases()}
    for release in registry.table("host_compilers")["releases"]:
        assert Version(release) in known, release


def test_the_gate_does_not_build_with_an_nvcc_that_rejects_the_host_gcc() -> None:
    """gcc 13.2 and CUDA 12.1 on driver 550: BUILD-004 reports 12.1, and the gate installs the
    release the recommendation names instead of building with it."""
    facts = _facts("rules/BUILD-004/fail")
    verdict = gate.judge("box", facts, stack.from_data({"llama_server_profiles": [MAIN]}))
    (finding,) = [f for f in verdict.findings if f.rule == "BUILD-004"]
    assert finding.subject == "CUDA toolkit /usr/local/cuda-12.1/bin/nvcc"
    assert "BUILD-004" in toolkits.faults(facts, "12.1.105", is_update=False)
    assert verdict.nvcc != "/usr/local/cuda-12.1/bin/nvcc"
    assert verdict.install_cuda and verdict.install_cuda != "12.1"
    assert toolkits.rejected_gcc(verdict.install_cuda, facts.system.gcc_version) is None


def test_the_recommendation_skips_the_releases_that_reject_the_host_gcc() -> None:
    """gcc 16 on driver 595: 13.2 (gcc up to 15) is never recommended; without the gcc known
    it is."""
    facts = _facts("rules/BUILD-004/fail-gcc16")
    facts.toolkits = []
    assert Version(recommend.build_release(facts)).release[:2] != (13, 2)
    unknown = copy.deepcopy(facts)
    unknown.system.gcc_version = None
    assert Version(recommend.build_release(unknown)).release[:2] == (13, 2)


def test_only_the_host_route_judges_the_host_gcc() -> None:
    facts = _facts("rules/BUILD-004/fail")
    assert any(f.rule == "BUILD-004" for f in engine.evaluate(facts, route="host"))
    assert not any(f.rule == "BUILD-004" for f in engine.evaluate(facts, route="planned-build"))
