"""`--format sarif|junit` on the real command line: check (one host), explain and plan, validated
against the SARIF 2.1.0 schema and parsed back with a JUnit library. The renderers themselves are
tested in tests/test_ci_formats.py; check of an inventory in tests/e2e/test_check_fleet.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from jsonschema import Draft4Validator
from junitparser import Error, Failure, JUnitXml

from tests.conftest import FIXTURES, REAL
from tests.test_ci_formats import _valid, validator  # noqa: F401 (a fixture)

GPUPROV = Path(sys.executable).parent / "gpuprov"
OLD_DRIVER = FIXTURES / "rules" / "DRV-001" / "fail.json"
LOG = REAL / "err804_ggml__llamacpp-3247_rtx3090-525.txt"


def gpuprov(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(GPUPROV), *args], capture_output=True, text=True, timeout=120, check=False
    )


def _facts(tmp_path: Path) -> Path:
    case = json.loads(OLD_DRIVER.read_text())
    path = tmp_path / "facts.json"
    path.write_text(json.dumps({"schema_version": 1, **case["facts"]}))
    return path


def test_check_sarif_names_each_finding_with_its_rule(
    tmp_path: Path,
    validator: Draft4Validator,  # noqa: F811
) -> None:
    facts = _facts(tmp_path)
    done = gpuprov("check", "--from", str(facts), "--format", "sarif")
    assert done.returncode == 1, done.stderr  # DRV-001 is an error, as without --format
    doc = json.loads(done.stdout)
    _valid(validator, doc)
    results = doc["runs"][0]["results"]
    assert "DRV-001" in {r["ruleId"] for r in results}
    assert all(r["locations"][0]["logicalLocations"][0]["name"] == str(facts) for r in results)


def test_explain_junit_has_a_failure_per_diagnosis() -> None:
    done = gpuprov("explain", str(LOG), "--format", "junit")
    assert done.returncode == 1, done.stderr
    xml = JUnitXml.fromstring(done.stdout)
    [suite] = list(xml)
    assert suite.name == str(LOG)
    failures = [r for case in suite for r in case.result if isinstance(r, Failure)]
    assert failures and any("forward compatibility" in (f.message or "") for f in failures)
    assert any("CTR-002" in case.name for case in suite)  # the Error 804 rule


def test_plan_sarif_reports_an_unreachable_host(
    tmp_path: Path,
    validator: Draft4Validator,  # noqa: F811
) -> None:
    inventory = tmp_path / "inv.py"
    inventory.write_text('hosts = [("127.0.0.1", {"ssh_port": 1})]\n')
    done = gpuprov("plan", str(inventory), "--format", "sarif")
    doc = json.loads(done.stdout)
    _valid(validator, doc)
    [run] = doc["runs"]
    notes = run["invocations"][0]["toolExecutionNotifications"]
    assert "Connection refused" in notes[0]["message"]["text"]
    assert run["invocations"][0]["executionSuccessful"] is False
    junit = JUnitXml.fromstring(gpuprov("plan", str(inventory), "--format", "junit").stdout)
    errors = [r for suite in junit for case in suite for r in case.result if isinstance(r, Error)]
    assert errors


def test_json_and_format_together_are_refused(tmp_path: Path) -> None:
    done = gpuprov("check", "--from", str(_facts(tmp_path)), "--json", "--format", "junit")
    assert done.returncode == 2 and "alternatives" in done.stderr


@pytest.mark.parametrize("fmt", ["sarif", "junit"])
def test_every_format_prints_nothing_else(tmp_path: Path, fmt: str) -> None:
    done = gpuprov("check", "--from", str(_facts(tmp_path)), "--format", fmt)
    assert done.stdout.lstrip().startswith("{" if fmt == "sarif" else "<?xml")
