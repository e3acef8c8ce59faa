"""The fleet report (checks/reporting/fleet.py), its text and redacted views, and the errors of
`gpuprov check INVENTORY` that come before any host is contacted. Probing real hosts over SSH is
tested in tests/e2e/test_check_fleet.py."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from checks.facts.model import HostFacts, from_dict
from checks.reporting import fleet, schema
from provision import render
from provision.cli import app
from provision.redact import anonymised

RULES = Path(__file__).parent / "fixtures" / "rules"


def _case(path: str) -> HostFacts:
    return from_dict(HostFacts, json.loads((RULES / path).read_text())["facts"])


def _fleet() -> fleet.FleetReport:
    return fleet.build(
        "inventories/lab.py",
        [
            ("old-driver", _case("DRV-001/fail.json"), None),
            ("no-gpu", _case("GPU-001/fail.json"), None),
            ("old-driver-2", _case("DRV-001/fail-cuda13.json"), None),
            ("gone", None, "could not connect: Connection refused"),
        ],
    )


def test_hosts_keep_inventory_order_and_share_findings() -> None:
    report = _fleet()
    assert [h.name for h in report.hosts] == ["old-driver", "no-gpu", "old-driver-2", "gone"]
    drv = next(s for s in report.shared if s.rule == "DRV-001")
    assert drv.hosts == ["old-driver", "old-driver-2"] and drv.severity == "error"
    counts = [len(s.hosts) for s in report.shared]
    assert counts == sorted(counts, reverse=True)  # most hosts first
    assert [h.name for h in report.unreachable] == ["gone"]
    assert report.hosts[3].facts is None and report.hosts[3].findings == []


def test_fleet_json_validates_and_names_each_hosts_findings() -> None:
    data = json.loads(_fleet().dumps())
    jsonschema.validate(data, schema.committed("fleet"))
    rules = {h["name"]: [f["rule"] for f in h["findings"]] for h in data["hosts"]}
    assert "DRV-001" in rules["old-driver"] and "DRV-001" not in rules["no-gpu"]
    assert data["hosts"][3]["error"] == "could not connect: Connection refused"


def test_text_view_has_a_section_per_host_and_the_fleet(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    render.fleet(_fleet())
    out = capsys.readouterr().out
    for name in ("old-driver", "no-gpu", "old-driver-2"):
        assert f" {name} " in out
    assert "unreachable gone: could not connect: Connection refused" in out
    assert "2/3: old-driver, old-driver-2" in out  # of the 3 hosts that answered
    assert "3 of 4 host(s) checked" in out


def test_redaction_renames_hosts_in_order_and_everywhere() -> None:
    hidden = anonymised(_fleet())
    assert [h.name for h in hidden.hosts] == ["host1", "host2", "host3", "host4"]
    drv = next(s for s in hidden.shared if s.rule == "DRV-001")
    assert drv.hosts == ["host1", "host3"]
    assert "old-driver" not in json.dumps(hidden.to_json())


def test_redaction_masks_one_hosts_names_in_anothers_text() -> None:
    """An unreachable host's error names the jump host that is another inventory host, and a
    checked host's own hostname: neither may survive, in any host's entry."""
    first = _case("DRV-001/fail.json")
    first.system.hostname = "rack7-gpu03"
    report = fleet.build(
        "inventories/lab.py",
        [
            ("gpu03.lab.example", first, None),
            ("gpu04.lab.example", None, "ssh via gpu03.lab.example (rack7-gpu03): timed out"),
        ],
    )
    text = json.dumps(anonymised(report).to_json())
    assert "gpu03" not in text and "lab.example" not in text
    assert "ssh via host1 (<redacted>): timed out" in text


def _invoke(*args: str) -> object:
    return CliRunner().invoke(app, ["check", *args])


def test_inventory_errors_exit_2_before_any_host_is_contacted(tmp_path: Path) -> None:
    missing = CliRunner().invoke(app, ["check", str(tmp_path / "nope.py")])
    assert missing.exit_code == 2 and "no such inventory file" in missing.stderr
    empty = tmp_path / "empty.py"
    empty.write_text("hosts = []\n")
    assert CliRunner().invoke(app, ["check", str(empty)]).exit_code == 2
    one = tmp_path / "one.py"
    one.write_text("hosts = ['10.0.0.1']\n")
    limited = CliRunner().invoke(app, ["check", str(one), "--limit", "other"])
    assert limited.exit_code == 2 and "matches no host" in limited.stderr
    both = CliRunner().invoke(app, ["check", str(one), "--from", str(one)])
    assert both.exit_code == 2 and "cannot be combined with an inventory" in both.stderr
    alone = CliRunner().invoke(app, ["check", "--limit", "gpu1"])
    assert alone.exit_code == 2 and "give the inventory file first" in alone.stderr
