"""One cause, one finding: a vLLM image CTR-010 reports is not reported again by CTR-003."""

from __future__ import annotations

import copy
import json

from checks.facts.model import HostFacts, from_dict
from checks.matrix import engine
from tests.conftest import FIXTURES


def _facts(name: str) -> HostFacts:
    return from_dict(HostFacts, json.loads((FIXTURES / f"{name}.json").read_text())["facts"])


def _ctr(facts: HostFacts) -> list[tuple[str, str]]:
    found = engine.evaluate(facts, route="host")
    return [(f.rule, f.subject) for f in found if f.rule in ("CTR-003", "CTR-010")]


def test_ctr_010_leaves_ctr_003_nothing_to_say_about_its_image() -> None:
    assert _ctr(_facts("rules/CTR-010/fail")) == [("CTR-010", "image vllm/vllm-openai:v0.16.0")]


def test_ctr_003_judges_host_compat_libraries_not_images() -> None:
    """Under runc the same image ran (gpustack#4678): neither rule fires on it. A host compat
    library on the library path beside a CTR-010 image is still CTR-003's."""
    runc = _facts("rules/CTR-010/pass")
    assert _ctr(runc) == []
    both = _facts("rules/CTR-010/fail")
    both.compat = copy.deepcopy(_facts("rules/CTR-003/fail").compat)
    assert sorted(rule for rule, _ in _ctr(both)) == ["CTR-003", "CTR-010"]
    (ctr_003,) = [subject for rule, subject in _ctr(both) if rule == "CTR-003"]
    assert ctr_003.startswith("compat library ")
