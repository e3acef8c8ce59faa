"""The gate over host facts plus a stack, and the build it plans: names, argv, CUDA repository.

Host facts are HostFacts JSON fixtures (tests/fixtures/stack/, and GPU-001's under rules/).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from checks.facts.model import HostFacts, from_dict
from checks.matrix import evaluators, registry
from checks.reporting import recommend
from provision import build, gate, stack
from tests.conftest import FIXTURES

MAIN = {"name": "main", "model": "/srv/models/m.gguf", "port": 8080}


def facts(name: str) -> HostFacts:
    """tests/fixtures/<name>.json: {description, facts}."""
    case = json.loads((FIXTURES / f"{name}.json").read_text())
    assert case["description"]
    return from_dict(HostFacts, case["facts"])


def host_stack(**data: Any) -> stack.Stack:
    return stack.from_data({"llama_server_profiles": [MAIN], **data})


def judge(fixture: str, **data: Any) -> gate.HostGate:
    return gate.judge("box", facts(fixture), host_stack(**data))


def rules(verdict: gate.HostGate) -> list[str]:
    return [f.rule for f in verdict.findings]


def test_cpu_only_host() -> None:
    verdict = judge("rules/GPU-001/fail")
    assert verdict.plan is not None
    assert (verdict.plan.archs, verdict.plan.cuda) == ((), False)
    assert "-DGGML_CUDA=OFF" in verdict.plan.cmake_args
    assert not any(a.startswith("-DCMAKE_CUDA") for a in verdict.plan.cmake_args)
    assert (verdict.nvcc, verdict.install_cuda, verdict.problems) == ("", "", [])
    assert rules(verdict) == ["GPU-001"]  # a warning: it does not block
    assert not verdict.blocked


def test_rtx3090_with_a_good_toolkit() -> None:
    verdict = judge("stack/rtx3090-cuda12.8")
    assert verdict.plan is not None
    assert verdict.plan.archs == ("86",)
    assert verdict.nvcc == "/usr/local/cuda-12.8/bin/nvcc"
    assert verdict.install_cuda == ""
    assert verdict.plan.cmake_args[-3:] == (
        "-DGGML_CUDA=ON",
        "-DCMAKE_CUDA_ARCHITECTURES=86",
        "-DCMAKE_CUDA_COMPILER=/usr/local/cuda-12.8/bin/nvcc",
    )
    assert (verdict.problems, rules(verdict), verdict.blocked) == ([], [], False)


def test_pinned_compiler_wins() -> None:
    verdict = judge("stack/rtx3090-cuda12.8", llama_cpp_cuda_compiler="/opt/cuda/bin/nvcc")
    assert verdict.nvcc == "/opt/cuda/bin/nvcc"
    assert verdict.plan is not None
    assert "-DCMAKE_CUDA_COMPILER=/opt/cuda/bin/nvcc" in verdict.plan.cmake_args


def test_gpu_without_toolkit_installs_the_recommended_one() -> None:
    fixture = "stack/rtx3090-driver560-no-toolkit"
    assert recommend.nvcc(facts(fixture)).value == "CUDA 12.6"
    verdict = judge(fixture)
    assert verdict.install_cuda == "12.6"
    assert verdict.nvcc == "/usr/local/cuda-12.6/bin/nvcc"
    assert verdict.plan is not None
    assert "-DCMAKE_CUDA_COMPILER=/usr/local/cuda-12.6/bin/nvcc" in verdict.plan.cmake_args
    assert (verdict.problems, verdict.blocked) == ([], False)


def test_gpu_without_toolkit_installs_an_update_release() -> None:
    fixture = "stack/rtx3090-driver575-no-toolkit"
    assert recommend.nvcc(facts(fixture)).value == "CUDA 12.9.1"
    verdict = judge(fixture)
    assert verdict.problems == []
    assert verdict.install_cuda.startswith("12.9")
    assert verdict.nvcc == "/usr/local/cuda-12.9/bin/nvcc"  # what cuda-toolkit-12-9 installs


def test_unknown_compute_capability_blocks() -> None:
    gpu_facts = from_dict(HostFacts, {"gpus": [{"index": 0, "name": "NVIDIA Mystery"}]})
    verdict = gate.judge("box", gpu_facts, host_stack())
    assert verdict.plan is None
    assert "compute capability is unknown" in verdict.problems[0]
    assert verdict.blocked


@pytest.mark.parametrize(
    ("cache_k", "cache_v", "flash", "refused"),
    [
        ("f16", "q8_0", "off", True),
        ("q4_0", "q4_0", "off", True),
        ("f16", "iq4_nl", "off", True),
        ("f16", "q8_0", "on", False),
        ("q8_0", "q8_0", "on", False),
        ("q8_0", "f16", "off", False),  # a quantized K cache alone is allowed
        ("f16", "bf16", "off", False),
    ],
)
def test_quantized_v_cache_needs_flash_attention(
    cache_k: str, cache_v: str, flash: str, refused: bool
) -> None:
    profile = {**MAIN, "cache_type_k": cache_k, "cache_type_v": cache_v, "flash_attn": flash}
    s = stack.from_data({"llama_server_profiles": [profile]})
    verdict = gate.judge("box", facts("stack/rtx3090-cuda12.8"), s)
    found = [f for f in verdict.findings if f.rule == "LCPP-008"]
    if refused:
        (finding,) = found
        assert finding.severity == "error"
        assert finding.subject == f"profile main: cache_type_v={cache_v}, flash_attn=off"
    else:
        assert found == []
    assert verdict.blocked is refused


@pytest.mark.parametrize(
    ("archs", "expected"),
    [
        ("120", ["LCPP-003"]),  # plain 120 has no FP4 MMA
        ("120a", []),
        ("86;120a", []),
        ("86-real", ["ARCH-002"]),  # SASS for 8.x only: nothing runs on 12.0
        ("86", []),  # 86 also carries compute_86 PTX, which the driver JITs for 12.0
    ],
)
def test_explicit_architectures_on_rtx5090(archs: str, expected: list[str]) -> None:
    verdict = judge("stack/rtx5090-cuda12.9", llama_cpp_cuda_architectures=archs)
    assert verdict.plan is not None
    assert verdict.plan.archs == tuple(archs.split(";"))
    assert rules(verdict) == expected
    for finding in verdict.findings:
        assert "planned build" in finding.subject
        assert finding.severity == "error"
    assert verdict.blocked is bool(expected)


def _build_subjects(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[dict[str, str]]:
    """A stand-in evaluator: one match per llama.cpp build, whatever the rule."""
    for b in facts.llamacpp:
        yield {"subject": b.path or ""}


def test_the_gate_applies_exactly_the_planned_build_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every rule detected by planned-build judges the planned build, and no other rule does."""
    for name in evaluators.EVALUATORS:
        monkeypatch.setitem(evaluators.EVALUATORS, name, _build_subjects)
    verdict = judge("stack/rtx5090-cuda12.9")
    planned = {f.rule for f in verdict.findings if f.subject == "planned build"}
    assert planned == {r.id for r in registry.routed("planned-build")}
    assert planned


def test_derived_architecture_on_rtx5090_is_120a() -> None:
    verdict = judge("stack/rtx5090-cuda12.9")
    assert verdict.plan is not None
    assert verdict.plan.archs == ("120a",)
    assert rules(verdict) == []


FACTS_3090 = "stack/rtx3090-cuda12.8"


def plan(fixture: str = FACTS_3090, nvcc: str = "", **data: Any) -> build.Build:
    return build.plan(host_stack(**data), facts(fixture), nvcc)


def test_same_inputs_same_name() -> None:
    first = plan(llama_cpp_cuda_architectures="86")
    again = plan(llama_cpp_cuda_architectures="86")
    assert first == again
    assert first.name.startswith("b7895-")
    assert len(first.name) == len("b7895-") + 12


@pytest.mark.parametrize(
    "change",
    [
        {"llama_cpp_ref": "b7896"},
        {"llama_cpp_git_url": "https://example.org/fork/llama.cpp.git"},
        {"llama_cpp_cuda_architectures": "89"},
        {"llama_cpp_cuda_architectures": "86-real"},
        {"llama_cpp_cmake_args": ["-DGGML_CUDA_FA_ALL_QUANTS=ON"]},
        {"llama_cpp_cuda_compiler": "/opt/cuda/bin/nvcc"},
    ],
    ids=lambda change: next(iter(change)),
)
def test_changed_input_changes_the_name(change: dict[str, Any]) -> None:
    base = {"llama_cpp_cuda_architectures": "86"}
    nvcc = change.get("llama_cpp_cuda_compiler", "")
    assert plan(nvcc=nvcc, **{**base, **change}).name != plan(**base).name


def test_profiles_and_canary_do_not_change_the_name() -> None:
    other = {**MAIN, "name": "other", "port": 9000, "ctx_size": 1024}
    assert plan(llama_server_profiles=[other], canary_interval=300).name == plan().name


def test_tarball_bytes_name_the_build(tmp_path: Path) -> None:
    tarball = tmp_path / "llama.cpp-b7895.tar.gz"
    tarball.write_bytes(b"one")
    first = plan(llama_cpp_tarball=str(tarball))
    assert first.name.startswith("llama.cpp-b7895-")
    assert first.tarball_remote.startswith(f"{build.TARBALLS}/")
    assert plan(llama_cpp_tarball=str(tarball)).name == first.name
    assert plan(llama_cpp_tarball=str(tarball), llama_cpp_tarball_subdir="src").name != first.name
    tarball.write_bytes(b"other bytes")
    changed = plan(llama_cpp_tarball=str(tarball))
    assert changed.name != first.name
    assert changed.tarball_remote != first.tarball_remote


def test_command_for_a_git_source() -> None:
    s = host_stack(llama_cpp_build_jobs=8)
    b = build.Build("b7895-abc", ("86-real", "89-virtual", "120a"), ("-DX=1", "-DY=a b"))
    assert build.command(s, b, "/var/cache/gpuprov/ccache") == [
        build.SCRIPT,
        *("--prefix", "/opt/gpuprov/llama.cpp", "--name", "b7895-abc"),
        *("--git-url", "https://github.com/ggml-org/llama.cpp.git", "--ref", "b7895"),
        *("--jobs", "8", "--ccache-dir", "/var/cache/gpuprov/ccache"),
        *("--expect-archs", "86 120a"),
        *("--", "-DX=1", "-DY=a b"),
    ]


def test_command_for_a_tarball_source(tmp_path: Path) -> None:
    tarball = tmp_path / "src.tar.gz"
    tarball.write_bytes(b"x")
    s = host_stack(llama_cpp_tarball=str(tarball), llama_cpp_tarball_subdir="llama.cpp-b7895")
    b = build.plan(s, facts("rules/GPU-001/fail"))
    assert build.command(s, b, "") == [
        build.SCRIPT,
        *("--prefix", "/opt/gpuprov/llama.cpp", "--name", b.name),
        *("--tarball", b.tarball_remote, "--subdir", "llama.cpp-b7895"),
        "--",
        *b.cmake_args,
    ]


@pytest.mark.parametrize(
    ("os_id", "version", "machine", "repo"),
    [
        ("ubuntu", "24.04", "x86_64", "ubuntu2404/x86_64"),
        ("ubuntu", "22.04", "aarch64", "ubuntu2204/sbsa"),
        ("debian", "12", "aarch64", "debian12/sbsa"),
        ("debian", "12", "arm64", "debian12/sbsa"),
    ],
)
def test_cuda_repo(os_id: str, version: str, machine: str, repo: str) -> None:
    assert build.cuda_repo(os_id, version, machine) == repo


@pytest.mark.parametrize(
    ("os_id", "version", "machine"),
    [
        ("fedora", "40", "x86_64"),
        ("ubuntu", None, "x86_64"),
        (None, None, None),
        ("ubuntu", "24.04", "ppc64le"),
        ("debian", "12", None),
    ],
)
def test_cuda_repo_unsupported(os_id: str | None, version: str | None, machine: str | None) -> None:
    with pytest.raises(build.BuildError, match="no NVIDIA CUDA apt repository"):
        build.cuda_repo(os_id, version, machine)
