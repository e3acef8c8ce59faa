"""`gpuprov status`'s host script and its parse (provision/status.py), and how a host's state is
judged against the inventory (provision/status_cli.host_status). The script's output here was
recorded on a test host that `gpuprov apply` had converged (two llama.cpp profiles and the
canary; tests/fixtures/status/). Reading real hosts end to end is tested in
tests/e2e/test_apply_llama.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from checks.facts.model import HostFacts
from provision import stack, status, status_cli
from provision.gate import HostGate

RECORDED = Path(__file__).parent / "fixtures" / "status"
PROFILES = [
    {"name": "alpha", "model": "/srv/models/tiny.gguf", "port": 8081},
    {"name": "beta", "model": "/srv/models/tiny.gguf", "port": 8082},
]
BUILD = "llama-cpp-python-0.3.36-083f3325e893"


def _stack() -> stack.Stack:
    return stack.from_data({"llama_server_profiles": PROFILES})


def _recorded() -> status.HostState:
    return status.parse((RECORDED / "e2e-llama_two-profiles_canary.txt").read_text())


def test_the_script_is_valid_sh_and_reads_the_prefix() -> None:
    text = status.script(stack.from_data({"llama_cpp_prefix": "/srv/llama+cpp"}), "docker")
    subprocess.run(["sh", "-n"], input=text, text=True, check=True)
    assert "readlink /srv/llama+cpp/current" in text and "ls -1 /srv/llama+cpp/builds" in text


def test_a_recorded_host_is_read_whole() -> None:
    found = _recorded()
    alpha = found.units["gpuprov-llama-alpha.service"]
    assert (alpha.load, alpha.active, alpha.sub) == ("loaded", "active", "running")
    assert alpha.since == "Tue 2026-11-24 06:19:57 UTC"
    assert (alpha.restarts, alpha.restarts_last_hour) == (1, 1)
    timer = found.units["gpuprov-canary.timer"]
    assert (timer.active, timer.sub, timer.restarts) == ("active", "waiting", None)
    oneshot = found.units["gpuprov-canary.service"]
    assert oneshot.active == "inactive" and oneshot.since == "Tue 2026-11-24 06:21:10 UTC"
    assert found.current == found.builds[0] == BUILD
    assert found.gpu_mib == {} and found.containers == {}
    assert status.last_canary(found.canary, "gpuprov-llama-beta.service") == (
        "2026-11-24T06:21:10+0000 ok: 1 token in 0.01s ('_')"
    )
    assert status.last_canary(found.canary, "gpuprov-llama-gamma.service") is None


def test_gpu_memory_is_given_to_the_unit_or_container_that_holds_it() -> None:
    """Constructed in the formats of the commands the script runs: nvidia-smi
    --query-compute-apps=pid,used_memory --format=csv,noheader,nounits, the last line of
    /proc/PID/cgroup (cgroup v2), and docker ps --no-trunc with --format
    '{{.ID}} {{.Names}} {{.Image}}'."""
    cid = "4f" * 32
    text = "\n".join(
        [
            "#=gpuprov-status= gpu-apps",
            "2101, 20110",
            "2102, 512",
            "3300, 22000",
            "9999, 100",
            "#=gpuprov-status= cgroups",
            "2101 0::/system.slice/gpuprov-llama-alpha.service",
            "2102 0::/system.slice/gpuprov-llama-alpha.service",
            f"3300 0::/system.slice/docker-{cid}.scope",
            "9999 0::/user.slice/user-1000.slice/session-3.scope",
            "#=gpuprov-status= containers",
            f"{cid} gpuprov-vllm-qwen-1 vllm/vllm-openai:v0.23.0",
        ]
    )
    found = status.parse(text)
    assert found.gpu_mib == {"gpuprov-llama-alpha.service": 20622, "gpuprov-vllm-qwen-1": 22000}
    assert found.containers == {"gpuprov-vllm-qwen-1": "vllm/vllm-openai:v0.23.0"}


@pytest.mark.parametrize(
    "text", ["", "#=gpuprov-status= unit", "#=gpuprov-status= x y\nNRestarts=9"]
)
def test_nothing_read_stays_unknown(text: str) -> None:
    found = status.parse(text)
    assert found.current is None and found.builds == [] and found.gpu_mib == {}


def test_a_host_as_planned_has_no_drift() -> None:
    gate = HostGate("h", HostFacts())
    host = status_cli.host_status("h", _stack(), gate, _recorded(), [])
    services = {s.service: s for s in host.services}
    assert list(services) == ["alpha", "beta", "canary"]
    assert all(s.drift == [] for s in host.services), host.services
    assert services["alpha"].runs == BUILD and services["alpha"].canary
    assert services["canary"].state == "active (waiting)"
    assert host.stale == [] and host.build_current == BUILD


def test_drift_stale_units_and_a_waiting_build_are_named() -> None:
    found = _recorded()
    found.units["gpuprov-llama-alpha.service"].active = "failed"
    found.units["gpuprov-llama-alpha.service"].sub = "failed"
    found.units["gpuprov-llama-old.service"] = status.UnitState(
        "gpuprov-llama-old.service", "loaded", "active", "running"
    )
    added = {**PROFILES[0], "name": "new", "port": 8083}
    one = stack.from_data({"llama_server_profiles": [*PROFILES, added]})
    changes = ["Unit gpuprov-llama-beta.service", "EnvironmentFile of alpha (0600)"]
    host = status_cli.host_status("h", one, None, found, changes)
    services = {s.service: s for s in host.services}
    assert "not running (failed (failed))" in services["alpha"].drift
    assert "EnvironmentFile of alpha (0600)" in services["alpha"].drift
    assert services["beta"].drift == ["Unit gpuprov-llama-beta.service"]
    assert services["new"].state == "not installed"
    assert host.stale == ["gpuprov-llama-old.service"]
