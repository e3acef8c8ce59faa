"""collect_env reports and PyTorch's compatibility warnings."""

from __future__ import annotations

from checks.facts.parsers import collect_env
from tests.conftest import REAL


def test_detects_the_real_report_only() -> None:
    for path in sorted(REAL.iterdir()):
        found = collect_env.detect_collect_env(path.read_text(errors="replace"))
        assert found == path.name.startswith("err_sm120_collect-env"), path.name


def test_warning_without_report_names_gpu_and_archs() -> None:
    text = (
        "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current "
        "PyTorch installation.\nThe current PyTorch install supports CUDA capabilities sm_50 "
        "sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.\n"
    )
    facts = collect_env.parse_collect_env(text)
    assert [(g.name, g.compute_capability) for g in facts.gpus] == [
        ("NVIDIA GeForce RTX 5090", "12.0")
    ]
    (torch,) = facts.python
    assert torch.cuda_archs is not None and torch.cuda_archs[-1] == "sm_90"


def test_wsl_platform_kernel() -> None:
    text = "Python platform: Linux-5.15.153.1-microsoft-standard-WSL2-x86_64-with-glibc2.35\n"
    facts = collect_env.parse_collect_env(text)
    assert facts.system.kernel_release == "5.15.153.1-microsoft-standard-WSL2"
    assert facts.system.machine == "x86_64"
