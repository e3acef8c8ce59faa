"""Meta-tests over the known-bad matrix, and every rule's failing and passing fixture."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
    assert len(RULES) == 140


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


def test_driver_faults_name_parameterless_host_errors() -> None:
    """evaluators.DRIVER_FAULTS: each an evaluator of host error rules that read no params (the
    GPU-001 evaluator and the recommendations call them without)."""
    from checks.matrix import toolkits

    for name in evaluators.DRIVER_FAULTS:
        users = [r for r in RULES if r.check == name]
        assert users, name
        for rule in users:
            assert (rule.severity, rule.params, "host" in rule.detected_by) == ("error", {}, True)
    assert set(toolkits.JUDGES) <= set(evaluators.EVALUATORS)
    assert all(any(r.check == name for r in RULES) for name in toolkits.JUDGES)


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


# A driver version with a one-digit third component: NVIDIA writes two (580.65.06), so this is a
# version printed from its parsed form (580.65.6) instead of its text.
_MANGLED_DRIVER = re.compile(r"\b\d{3}\.\d{1,3}\.\d\b")


def _rendered(facts: HostFacts) -> list[str]:
    """Every text a check report shows for `facts`: findings and recommendations."""
    from checks.reporting import recommend

    texts = [t for f in engine.evaluate(facts) for t in (f.subject, f.message, f.fix)]
    return texts + [t for r in recommend.recommend(facts) for t in (r.value, r.detail)]


@pytest.mark.parametrize(("rule", "path"), _cases("fail"))
def test_driver_versions_are_shown_as_written(rule: registry.Rule, path: Path) -> None:
    for text in _rendered(_load(path)):
        assert not _MANGLED_DRIVER.search(text), text


@pytest.mark.parametrize(
    ("case", "shown"),
    [
        ("DRV-001/fail-cuda13", "Upgrade the NVIDIA driver to 580.65.06 or newer"),
        ("DRV-002/fail-cuda12.9", "is older than 575.51.03, the driver CUDA 12.9 ships with"),
        ("DRV-004/fail-gb10", "a driver of 575.51.03 or newer"),
        ("CTR-001/fail-cuda13", "Upgrade the driver to 580.65.06 or newer"),
        ("CTR-003/fail-575", "(driver 575.51.03) is on the library path"),
    ],
)
def test_minimum_drivers_keep_the_tables_spelling(case: str, shown: str) -> None:
    """tables/cuda.toml writes 580.65.06 and 575.51.03; findings say exactly that."""
    rule_id = case.split("/")[0]
    findings = engine.evaluate(_load(RULE_FIXTURES / f"{case}.json"))
    assert any(shown in f.message + " " + f.fix for f in findings if f.rule == rule_id), [
        (f.message, f.fix) for f in findings
    ]


_LISTED = ("gpus", "toolkits", "compat", "python", "llamacpp", "vllm_services", "llama_servers")


def _listed(facts: HostFacts) -> dict[str, list[Any]]:
    """The facts that are lists of items, by name."""
    return {name: getattr(facts, name) for name in _LISTED} | {"images": facts.containers.images}


def _one_fact_missing(facts: HostFacts) -> Iterator[tuple[str, HostFacts]]:
    """Copies of `facts` with one known text fact of a listed item (a toolkit, a build, an image,
    a compat library...) set back to unknown."""
    for name, items in _listed(facts).items():
        for i, item in enumerate(items):
            for f in dataclasses.fields(item):
                if isinstance(getattr(item, f.name), str):
                    hollow = copy.deepcopy(facts)
                    setattr(_listed(hollow)[name][i], f.name, None)
                    yield f"{name}[{i}].{f.name}", hollow


@pytest.mark.parametrize(("rule", "path"), _cases("fail"))
def test_an_unknown_fact_never_reads_none(rule: registry.Rule, path: Path) -> None:
    """A finding or recommendation names what it is about in words, whatever is unknown of it."""
    facts = _load(path)
    for missing, hollow in [("nothing", facts), *_one_fact_missing(facts)]:
        for text in _rendered(hollow):
            assert not re.search(r"\bNone\b", text), (missing, text)


def test_a_llamacpp_build_without_path_or_version_is_named_as_such() -> None:
    facts = _facts("LCPP-003", "fail")
    facts.llamacpp[0].path = None
    assert facts.llamacpp[0].version is None
    (finding,) = [f for f in engine.evaluate(facts) if f.rule == "LCPP-003"]
    assert finding.subject == "a llama.cpp build (version unknown)"
    assert finding.message.startswith("a llama.cpp build (version unknown) is configured with")
    facts.llamacpp[0].version = "6123"
    (finding,) = [f for f in engine.evaluate(facts) if f.rule == "LCPP-003"]
    assert finding.message.startswith("llama.cpp build 6123 is configured with")
