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
        ("13.0.88", "16.1.1", 15),  # conda-forge cuda-nvcc-impl#49
        ("13.1.115", "16.1.1", 15),  # conda-forge cuda-nvcc-impl#53
        ("13.1.1", "15.2.1", None),
        ("12.6.85", "14.2.1", 13),  # jetpack-nixos#375
        ("12.6.85", "13.3.0", None),
        ("12.0.140", "13.2.0", 12),  # darknet#129
        ("11.8.89", "12.3.0", 11),  # ScaleLLM#185
        ("12.4.131", "16.1.1", 12),  # 12.4 is not listed: 12.5 accepts 13 at most, 12.1 12
        ("12.4.131", "14.2.1", 12),
        ("12.4.131", "13.3.0", None),  # between 12.1's 12 and 12.5's 13: unknown
        ("10.2.89", "16.1.1", None),  # older than the table: unknown
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
    """gcc 16 on driver 595 and an RTX 5090: every release that builds for it refuses gcc 16, so
    none is good as the host is; the one to use names gcc-15 as its host compiler. Without the
    gcc known, 13.2 is recommended as good."""
    facts = _facts("rules/BUILD-004/fail-gcc16")
    facts.toolkits = []
    release = recommend.build_release(facts)
    assert release.startswith("none good on this host as it is: CUDA 13.2")
    assert "refuses the host's gcc 16.1.1: install gcc-15" in release
    assert "-DCMAKE_CUDA_HOST_COMPILER=/usr/bin/g++-15" in recommend.nvcc(facts).detail
    assert "BUILD-004" in recommend.nvcc(facts).basis
    unknown = copy.deepcopy(facts)
    unknown.system.gcc_version = None
    assert Version(recommend.build_release(unknown)).release[:2] == (13, 2)


def test_only_the_host_route_judges_the_host_gcc() -> None:
    facts = _facts("rules/BUILD-004/fail")
    assert any(f.rule == "BUILD-004" for f in engine.evaluate(facts, route="host"))
    assert not any(f.rule == "BUILD-004" for f in engine.evaluate(facts, route="planned-build"))


@pytest.mark.parametrize(
    ("cc", "gcc", "rejected"),
    [
        ("8.9", "16.1.1", ("13.0.2", "13.1.1", "13.2.2", "12.9.1", "12.8.1", "12.6.3")),
        ("12.0", "16.1.1", ("13.0.2", "13.1.1", "13.2.2", "12.9.1", "12.8.1")),
        ("8.6", "15.2.1", ("12.9.1", "12.8.1", "12.6.3", "12.5")),
        ("6.1", "14.2.1", ("12.6.3", "12.5")),
    ],
)
def test_the_picked_release_accepts_the_host_gcc(
    cc: str, gcc: str, rejected: tuple[str, ...]
) -> None:
    """Each release the host-compiler table rejects for this gcc is flagged by BUILD-004, and the
    release gpuprov picks to build with is none of them (gcc 16 on driver 595 once got 13.1.1)."""
    facts = _facts("rules/BUILD-004/fail-gcc16")
    facts.toolkits = []
    facts.gpus[0].compute_capability = cc
    facts.system.gcc_version = gcc
    for release in rejected:
        assert "BUILD-004" in toolkits.faults(facts, release), release
    picked = recommend.build_release(facts)
    if picked[0].isdigit():
        assert picked not in rejected
        assert "BUILD-004" not in toolkits.faults(facts, picked)


def test_blackwell_with_gcc_15_gets_a_cuda_13_release() -> None:
    """CUDA 13.0 and 13.1 accept gcc 15, so a Blackwell host with it is still given CUDA 13."""
    facts = _facts("rules/BUILD-004/pass-cuda13.1-gcc15")
    facts.toolkits = []
    picked = Version(recommend.build_release(facts))
    assert picked.release[:2] in {(13, 0), (13, 1), (13, 2)}
    assert toolkits.rejected_gcc(str(picked), facts.system.gcc_version) is None
