"""Every parser case under tests/fixtures/probes/<module>/<case>.json, run against its parser."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from checks.facts import parsers
from checks.facts.model import to_dict
from tests.conftest import PROBE_CASES, assert_subset, load_case

ALL_CASES = sorted(PROBE_CASES.glob("*/*.json"))


@pytest.mark.parametrize("path", ALL_CASES, ids=[f"{p.parent.name}/{p.stem}" for p in ALL_CASES])
def test_parser_case(path: Path) -> None:
    case = load_case(path)
    assert case.get("source"), f"{path}: every case names its source"
    module = importlib.import_module(f"checks.facts.parsers.{path.parent.name}")
    parser = getattr(module, case["parser"])
    assert_subset(case["facts"], to_dict(parser(case["text"])))


def test_there_are_cases() -> None:
    assert len(ALL_CASES) >= 10


def test_every_parser_module_has_recorded_cases() -> None:
    """A parser module is found by its folder; it needs real recorded output to land."""
    names = {m.__name__.rsplit(".", 1)[-1] for m in parsers.modules()}
    folders = {p.name for p in PROBE_CASES.iterdir() if p.is_dir()}
    assert names == folders
    for name in names:
        assert list((PROBE_CASES / name).glob("*.json")), f"{name}: no recorded case"


def test_modules_merge_with_the_driver_report_first() -> None:
    order = [m.__name__.rsplit(".", 1)[-1] for m in parsers.modules()]
    assert order[0] == "nvidia_smi"
    assert {"collect_env", "kernel", "nvcc", "containers"} <= set(order)
    assert "sections" not in order  # a helper, not a parser module
