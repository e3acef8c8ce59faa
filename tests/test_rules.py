"""Meta-tests over the known-bad matrix, and every rule's failing and passing fixture."""

from __future__ import annotations

import json
import re
import string
from pathlib import Path

import pytest

from checks.facts.model import HostFacts, from_dict
from checks.logs import logscan
from checks.matrix import engine, evaluators, registry
from tests.conftest import FIXTURES

RULE_FIXTURES = FIXTURES / "rules"
RULES = registry.rules()
IDS = [r.id for r in RULES]
DOCS = Path(__file__).parent.parent / "docs" / "rules.md"


def _load(path: Path) -> HostFacts:
    case = json.loads(path.read_text())
    assert case["description"], f"{path} needs a description"
    return from_dict(HostFacts, case["facts"])


def _facts(rule_id: str, kind: str) -> HostFacts:
    return _load(RULE_FIXTURES / rule_id / f"{kind}.json")


def _cases(kind: str) -> list[pytest.ParameterSet]:
    """Every fail*.json or pass*.json: fail.json and pass.json are required, more are welcome."""
    return [
        pytest.param(rule, path, id=f"{rule.id}/{path.stem}")
        for rule in RULES
        for path in sorted((RULE_FIXTURES / rule.id).glob(f"{kind}*.json"))
    ]


def test_rule_count_is_pinned() -> None:
    """Adding or removing a rule is a deliberate change: update this number with it."""
    assert len(RULES) == 39


AREAS = {
    "drv": "driver",
    "host": "host",
    "gpu": "host",
    "ctr": "container",
    "arch": "arch",
    "lcpp": "llamacpp",
    "vllm": "vllm",
    "build": "build",
}


def test_ids_are_unique_and_well_formed() -> None:
    assert len(set(IDS)) == len(IDS)
    for rule in RULES:
        assert re.fullmatch(r"[A-Z]{2,5}-\d{3}", rule.id), rule.id
        assert rule.id.split("-")[0].lower() in AREAS, rule.id
        assert rule.area in AREAS.values(), f"{rule.id} is in checks/matrix/rules/{rule.area}.toml"


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_rule_is_complete(rule: registry.Rule) -> None:
    assert rule.severity in registry.SEVERITIES
    assert rule.check in evaluators.EVALUATORS, f"{rule.id}: no evaluator {rule.check!r}"
    assert rule.title and rule.message and rule.fix and len(rule.why.strip()) > 80
    assert rule.citations, f"{rule.id} has no citation"
    for citation in rule.citations:
        assert re.match(r"https://[\w.-]+\.\w+/\S+$", citation), f"{rule.id}: {citation!r}"


SIGNATURE_FIXTURES = FIXTURES / "signatures"
FACT_RULES = [r for r in RULES if r.check != "log_only"]


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_rule_has_both_fixtures(rule: registry.Rule) -> None:
    """Facts rules: fail.json and pass.json; log-only rules: signatures with match and near logs."""
    if rule.check != "log_only":
        for kind in ("fail", "pass"):
            assert (RULE_FIXTURES / rule.id / f"{kind}.json").is_file(), (
                f"{rule.id}: no {kind}.json"
            )
        return
    sigs = [s for s in logscan.signatures() if s.rule == rule.id]
    assert sigs, f"{rule.id} is log-only but no signature is evidence for it"
    for sig in sigs:
        assert list((SIGNATURE_FIXTURES / sig.id).glob("match*.log")), f"{sig.id}: no match log"
        assert list((SIGNATURE_FIXTURES / sig.id).glob("near*.log")), f"{sig.id}: no near log"


def test_every_signature_names_a_rule() -> None:
    for sig in logscan.signatures():
        assert registry.rule(sig.rule) is not None, sig.id
        for variant in sig.variants:
            assert variant.rule is None or registry.rule(variant.rule) is not None, sig.id
    ids = [s.id for s in logscan.signatures()]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize(("rule", "path"), _cases("fail"))
def test_rule_fails_on_its_failing_fixture(rule: registry.Rule, path: Path) -> None:
    findings = [f for f in engine.evaluate(_load(path)) if f.rule == rule.id]
    assert findings, f"{rule.id} did not fire on its failing fixture"
    for finding in findings:
        assert "unknown" not in finding.message, finding.message
        assert finding.severity == rule.severity


@pytest.mark.parametrize(("rule", "path"), _cases("pass"))
def test_rule_passes_on_its_passing_fixture(rule: registry.Rule, path: Path) -> None:
    findings = [f for f in engine.evaluate(_load(path)) if f.rule == rule.id]
    assert not findings, [f.message for f in findings]


@pytest.mark.parametrize("rule", FACT_RULES, ids=[r.id for r in FACT_RULES])
def test_placeholders_are_filled_by_the_evaluator(rule: registry.Rule) -> None:
    """Every {name} in message and fix is a key the evaluator yields."""
    match = next(evaluators.EVALUATORS[rule.check](_facts(rule.id, "fail"), rule.params))
    for template in (rule.message, rule.fix):
        names = {name for _, name, _, _ in string.Formatter().parse(template) if name}
        assert names <= set(match), f"{rule.id}: {names - set(match)} not provided"


def test_no_fixture_without_a_rule() -> None:
    assert {p.name for p in RULE_FIXTURES.iterdir()} == {r.id for r in FACT_RULES}


def test_empty_facts_give_no_error() -> None:
    """Nothing known is nothing wrong: unknown never becomes an error finding."""
    assert not [f for f in engine.evaluate(HostFacts()) if f.severity == "error"]


def test_docs_are_generated_from_the_rules() -> None:
    """docs/rules.md is `python -m checks.matrix.docs`; regenerate it when rules change."""
    from checks.matrix.docs import rules_markdown

    assert DOCS.read_text() == rules_markdown()


def test_fail_on_thresholds() -> None:
    findings = engine.evaluate(_facts("CTR-005", "fail"))
    assert engine.reaches(findings, "warning")
    assert not engine.reaches(findings, "error")
    assert not engine.reaches(findings, "never")


def test_arch_001_fix_names_a_wheel_the_driver_runs() -> None:
    """Driver 570 runs CUDA 12.8: the fix must not send an RTX 5090 user to the cu130 wheels."""
    (finding,) = [f for f in engine.evaluate(_facts("ARCH-001", "fail")) if f.rule == "ARCH-001"]
    assert "whl/cu128" in finding.fix and "cu130" not in finding.fix
