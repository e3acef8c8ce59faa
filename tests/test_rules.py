"""Meta-tests over the known-bad matrix, and every rule's failing and passing fixture."""

from __future__ import annotations

import json
import re
import string
from pathlib import Path

import pytest

from checks import packaged
from checks.facts.model import HostFacts, from_dict
from checks.logs import logscan
from checks.matrix import engine, evaluators, registry
from tests.conftest import FIXTURES

ROOT = Path(__file__).parent.parent
RULE_FIXTURES = FIXTURES / "rules"
RULES = registry.rules()
IDS = [r.id for r in RULES]
DOCS = ROOT / "docs" / "rules.md"
FACT_ROUTES = [route for route in registry.ROUTES if route != registry.LOGS]


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


AREAS = registry.areas()
PREFIXES = {prefix: area for area, info in AREAS.items() for prefix in info["prefixes"]}


def test_areas_are_the_rules_files() -> None:
    """Every rules file is an area with a title, and every area has a rules file."""
    stems = {stem for stem, _ in packaged.toml_folder("checks.matrix", "rules")}
    assert stems == set(AREAS)
    assert all(info["title"] and info["prefixes"] for info in AREAS.values())


def test_ids_are_unique_and_well_formed() -> None:
    assert len(set(IDS)) == len(IDS)
    for rule in RULES:
        assert re.fullmatch(r"[A-Z]{2,5}-\d{3}", rule.id), rule.id
        prefix = rule.id.split("-")[0]
        assert prefix in PREFIXES, rule.id
        assert PREFIXES[prefix] == rule.area, (
            f"{rule.id} is in checks/matrix/rules/{rule.area}.toml"
        )


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_rule_is_complete(rule: registry.Rule) -> None:
    assert rule.severity in registry.SEVERITIES
    assert rule.title and rule.message and rule.fix and len(rule.why.strip()) > 80
    assert rule.citations, f"{rule.id} has no citation"
    for citation in rule.citations:
        assert re.match(r"https://[\w.-]+\.\w+/\S+$", citation), f"{rule.id}: {citation!r}"


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_rule_says_what_detects_it(rule: registry.Rule) -> None:
    """detected_by: routes of the vocabulary; an evaluator exactly when a route other than logs."""
    assert rule.detected_by, f"{rule.id}: no detected_by"
    assert len(set(rule.detected_by)) == len(rule.detected_by), rule.id
    assert set(rule.detected_by) <= set(registry.ROUTES), rule.id
    by_facts = bool(set(rule.detected_by) & set(FACT_ROUTES))
    assert (rule.check is not None) == by_facts, f"{rule.id}: check {rule.check!r}"
    if rule.check is not None:
        assert rule.check in evaluators.EVALUATORS, f"{rule.id}: no evaluator {rule.check!r}"


def _signature_rules() -> set[str]:
    """The rules a log signature, or one of its variants, is evidence for."""
    found = set()
    for sig in logscan.signatures():
        found.add(sig.rule)
        found.update(v.rule for v in sig.variants if v.rule)
    return found


def test_logs_detect_exactly_the_rules_signatures_point_at() -> None:
    assert {r.id for r in registry.routed(registry.LOGS)} == _signature_rules()


@pytest.mark.parametrize("rule", [r for r in RULES if r.fixed_by], ids=lambda r: r.id)
def test_fixed_by_names_a_role(rule: registry.Rule) -> None:
    assert rule.fixed_by is not None
    assert (ROOT / "roles" / rule.fixed_by / "tasks").is_dir(), rule.fixed_by


SIGNATURE_FIXTURES = FIXTURES / "signatures"
FACT_RULES = [r for r in RULES if r.check is not None]


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_rule_has_both_fixtures(rule: registry.Rule) -> None:
    """Rules an evaluator detects: fail.json and pass.json; rules logs detect: signatures with
    match and near logs."""
    if rule.check is not None:
        for kind in ("fail", "pass"):
            assert (RULE_FIXTURES / rule.id / f"{kind}.json").is_file(), (
                f"{rule.id}: no {kind}.json"
            )
    if registry.LOGS not in rule.detected_by:
        return
    sigs = [
        s
        for s in logscan.signatures()
        if s.rule == rule.id or any(v.rule == rule.id for v in s.variants)
    ]
    assert sigs, f"{rule.id} is detected in logs but no signature is evidence for it"
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


def _names(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def _matches(rule: registry.Rule) -> list[dict[str, str]]:
    """What the evaluator yields on each of the rule's failing fixtures."""
    assert rule.check is not None
    return [
        match
        for path in sorted((RULE_FIXTURES / rule.id).glob("fail*.json"))
        for match in evaluators.EVALUATORS[rule.check](_load(path), rule.params)
    ]


@pytest.mark.parametrize("rule", FACT_RULES, ids=[r.id for r in FACT_RULES])
def test_placeholders_are_filled_by_the_evaluator(rule: registry.Rule) -> None:
    """Every {name} in message and fix is a key the evaluator yields."""
    assert rule.check is not None
    match = next(evaluators.EVALUATORS[rule.check](_facts(rule.id, "fail"), rule.params))
    for template in (rule.message, rule.fix):
        assert _names(template) <= set(match), f"{rule.id}: {_names(template) - set(match)}"


@pytest.mark.parametrize("rule", [r for r in RULES if r.variants], ids=lambda r: r.id)
def test_every_variant_is_reached_and_filled(rule: registry.Rule) -> None:
    """Each variant's case comes out of a failing fixture, whose match fills its wording."""
    cases = [v.case for v in rule.variants]
    assert len(set(cases)) == len(cases), rule.id
    matches = _matches(rule)
    for variant in rule.variants:
        assert variant.message or variant.fix, f"{rule.id}/{variant.case}: no wording"
        reached = [m for m in matches if m.get("case") == variant.case]
        assert reached, f"{rule.id}: no failing fixture reaches case {variant.case!r}"
        for template in (variant.message or rule.message, variant.fix or rule.fix):
            assert _names(template) <= set(reached[0]), (rule.id, variant.case)


@pytest.mark.parametrize("rule", FACT_RULES, ids=[r.id for r in FACT_RULES])
def test_a_route_evaluates_the_rules_it_detects(rule: registry.Rule) -> None:
    """evaluate(route=...) fires a rule on its failing fixture exactly on the routes it lists."""
    facts = _facts(rule.id, "fail")
    for route in FACT_ROUTES:
        fired = any(f.rule == rule.id for f in engine.evaluate(facts, route=route))
        assert fired == (route in rule.detected_by), (rule.id, route)


def test_no_fixture_without_a_rule() -> None:
    """Only rules an evaluator detects have fact fixtures."""
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


def test_rule_docs_and_json_say_what_detects_and_fixes_it() -> None:
    from provision import render

    rule = registry.rule("CTR-004")
    assert rule is not None
    assert "Detected by: host, logs\n" in rule.docs()
    assert "Fixed by: the nvidia_container_toolkit role\n" in rule.docs()
    data = render.rule_json(rule)
    assert (data["detected_by"], data["fixed_by"]) == (["host", "logs"], "nvidia_container_toolkit")
    unfixed = registry.rule("VLLM-002")
    assert unfixed is not None and "Fixed by" not in unfixed.docs()
    assert render.rule_json(unfixed)["fixed_by"] is None
