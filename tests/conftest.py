"""Shared test helpers: fixture paths and the per-case parser runner."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
REAL = FIXTURES / "real"
PROBE_CASES = FIXTURES / "probes"


def load_case(path: Path) -> dict[str, Any]:
    """A parser case: {source, parser, output | output_file, facts}; paths are fixtures-relative."""
    case: dict[str, Any] = json.loads(path.read_text())
    if "output_file" in case:
        case["text"] = (FIXTURES / case["output_file"]).read_text(errors="replace")
    else:
        case["text"] = "\n".join(case["output"]) + "\n"
    return case


def assert_subset(expected: Any, actual: Any, where: str = "facts") -> None:
    """Every key in `expected` matches `actual`; lists match item by item, with equal length."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where}: expected an object, got {actual!r}"
        for key, value in expected.items():
            assert key in actual, f"{where}.{key} missing"
            assert_subset(value, actual[key], f"{where}.{key}")
    elif isinstance(expected, list) and expected and isinstance(expected[0], dict):
        assert isinstance(actual, list), f"{where}: expected a list, got {actual!r}"
        assert len(expected) == len(actual), (
            f"{where}: {len(actual)} items, expected {len(expected)}"
        )
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            assert_subset(e, a, f"{where}[{i}]")
    else:
        assert expected == actual, f"{where}: expected {expected!r}, got {actual!r}"


def cases(module: str) -> list[Any]:
    """pytest params for every case file under tests/fixtures/probes/<module>/."""
    return [
        pytest.param(path, id=path.stem) for path in sorted((PROBE_CASES / module).glob("*.json"))
    ]


def sh(command: str, env: dict[str, str] | None = None, check: bool = True) -> str:
    """Run a probe's POSIX sh command here; stdout and stderr joined, as the gatherer reads them."""
    done = subprocess.run(
        ["sh", "-c", command], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


# Hypothesis' run length for every property test (tests/support/hostile.py).
from tests.support import hostile as _hostile  # noqa: E402,F401
