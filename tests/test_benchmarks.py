"""The benchmark scripts run and print their ratio line (a smoke test: no timing is asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).parent.parent / "benchmarks"


def _run(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, check=True, timeout=300
    )
    return done.stdout


def test_explain_benchmark_prints_a_ratio() -> None:
    out = _run(str(BENCHMARKS / "explain_vs_grep.py"), "--mb", "1", "--runs", "1")
    assert "gpuprov explain" in out and "grep -E -f" in out
    assert "ratio gpuprov/grep = " in out


def test_check_benchmark_prints_a_ratio() -> None:
    out = _run(str(BENCHMARKS / "check_vs_ansible_setup.py"), "--runs", "1")
    assert "ratio gpuprov/ansible = " in out
