"""`gpuprov check INVENTORY` on real test hosts: every host probed over SSH at once, one report
per host, the findings they share, and an unreachable host in one line."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from junitparser import Error, Failure, JUnitXml

from checks.reporting import schema
from provision.testhost import hosts
from tests.e2e.hosts import gpuprov


@pytest.fixture(name="inventory")
def inventory_fixture(testhost: hosts.TestHost, tmp_path: Path) -> Path:
    """Two inventory names for the shared test host, and one nobody answers for."""
    _, data = hosts.pyinfra_host(testhost)
    path = tmp_path / "fleet.py"
    path.write_text(
        f"_ssh = {data!r}\n"
        "hosts = [\n"
        f"    ('gpu-a', {{**_ssh, 'ssh_hostname': {testhost.address!r}}}),\n"
        f"    ('gpu-b', {{**_ssh, 'ssh_hostname': {testhost.address!r}}}),\n"
        "    ('gone', {**_ssh, 'ssh_hostname': '127.0.0.1', 'ssh_port': 1}),\n"
        "]\n"
        "gpus = ['gpu-a', 'gpu-b']\n"
    )
    return path


def test_every_host_is_probed_and_judged(inventory: Path) -> None:
    done = gpuprov("check", str(inventory), "--json", timeout=120)
    assert done.returncode == 1, done.stderr  # a host could not be checked
    report = json.loads(done.stdout)
    jsonschema.validate(report, schema.committed("fleet"))
    by_name = {h["name"]: h for h in report["hosts"]}
    assert list(by_name) == ["gpu-a", "gpu-b", "gone"]
    for name in ("gpu-a", "gpu-b"):
        facts = by_name[name]["facts"]
        assert by_name[name]["error"] is None
        assert facts["system"]["os_id"] == "debian"  # read on the host, not here
        assert facts["sources"] == [f"gpuprov probes on {name} (pyinfra)"]
    assert "Connection refused" in by_name["gone"]["error"]
    assert by_name["gone"]["facts"] is None and by_name["gone"]["findings"] == []
    shared = {s["rule"]: s["hosts"] for s in report["shared"]}
    assert shared["GPU-001"] == ["gpu-a", "gpu-b"]  # the test hosts have no GPU
    assert "probing 3 host(s)" in done.stderr and "2 of 3 host(s) answered" in done.stderr


def test_limit_selects_hosts_and_text_names_the_unreachable(inventory: Path) -> None:
    one = gpuprov("check", str(inventory), "--limit", "gpu-b", "--json", timeout=120)
    assert [h["name"] for h in json.loads(one.stdout)["hosts"]] == ["gpu-b"]
    assert one.returncode == 0  # GPU-001 is a warning, below the default --fail-on error
    group = gpuprov("check", str(inventory), "--limit", "gpus", "--fail-on", "warning")
    assert group.returncode == 1
    text = gpuprov("check", str(inventory), "--fail-on", "never")
    assert text.returncode == 0
    assert "unreachable gone: could not connect: Connection refused" in text.stdout
    assert "2/2: gpu-a, gpu-b" in text.stdout


def test_redacted_fleet_keeps_hosts_apart(inventory: Path) -> None:
    done = gpuprov("check", str(inventory), "--json", "--redact", "--limit", "gpu-*")
    report = json.loads(done.stdout)
    assert [h["name"] for h in report["hosts"]] == ["host1", "host2"]
    assert "gpu-a" not in done.stdout and "gpu-b" not in done.stdout


def test_a_fleet_check_reads_in_ci_formats(inventory: Path) -> None:
    """JUnit: a suite per host, the unreachable one as an error; SARIF: results on the hosts
    that answered, located on the inventory file, and the unreachable host as a notification."""
    junit = JUnitXml.fromstring(gpuprov("check", str(inventory), "--format", "junit").stdout)
    suites = {suite.name: suite for suite in junit}
    assert list(suites) == ["gpu-a", "gpu-b", "gone"]
    assert any(isinstance(r, Error) for case in suites["gone"] for r in case.result)
    gpu001 = [case for case in suites["gpu-a"] if case.name.startswith("GPU-001")]
    [failure] = gpu001[0].result  # a finding is a failure, with its severity as its type
    assert isinstance(failure, Failure) and failure.type == "warning"
    doc = json.loads(gpuprov("check", str(inventory), "--format", "sarif").stdout)
    [run] = doc["runs"]
    hosts = {r["locations"][0]["logicalLocations"][0]["name"] for r in run["results"]}
    assert hosts == {"gpu-a", "gpu-b"}
    uri = run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri.endswith("fleet.py")
    assert "gone" in run["invocations"][0]["toolExecutionNotifications"][0]["message"]["text"]
