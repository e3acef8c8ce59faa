"""On-demand vLLM replicas and a vLLM swap group end to end, with systemd's own parts, on a real
test host.

Real: systemd (a .socket unit owns each public port, systemd-socket-proxyd forwards once the
replica's /health answers and exits when idle, StopWhenUnneeded= stops the replica, Conflicts=
swaps group members), pyinfra, the gate and its VRAM budget, the canary, `gpuprov status`.
Stand-ins, as in tests/e2e/test_apply_vllm.py: `docker run` is a small OpenAI-compatible server
published where the unit's `-p` says (tests/support/standin_docker.py), and `nvidia-smi` answers
for two RTX 3090s. The swap group's two members take 0.9 of GPU 0 each: the plan fits only
because a group counts once. The tests run in order on one host.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from provision.testhost import hosts
from tests.e2e.hosts import (
    VLLM_BASE,
    Host,
    Inventory,
    apply,
    gpuprov,
    host_report,
    vllm_host,
    wait_canary_idle,
    wait_for,
)
from tests.e2e.hosts import (
    unit_state as state,
)

pytestmark = pytest.mark.e2e

MODEL = "Lorbus/Qwen3.6-27B-int4-AutoRound"
IDLE = 6
# `docker run` of a replica's container; [s] keeps the pattern from matching the shell running it
SOLO_RUN = "--name gpuprov-vllm-[s]olo"
SWAP_RUN = "--name gpuprov-vllm-[s]wap-"
SOLO = {"name": "solo", "model": MODEL, "port": 8601, "gpus": [1], "residency": "on_demand"}
A = {"name": "swap-a", "model": MODEL, "port": 8602, "gpus": [0], "swap_group": "pair"}
B = {"name": "swap-b", "model": MODEL, "port": 8603, "gpus": [0], "swap_group": "pair"}


@pytest.fixture(scope="module")
def host(testhost_factory: Callable[[str], hosts.TestHost]) -> Host:
    return vllm_host(testhost_factory, "e2e-vllm-demand")


@pytest.fixture(scope="module")
def inventory(host: Host, tmp_path_factory: Any) -> Inventory:
    base = {
        **VLLM_BASE,
        "vllm_startup_seconds": 60,
        "vllm_replicas": [
            {**SOLO, "idle_seconds": IDLE},
            {**A, "idle_seconds": 120},
            {**B, "idle_seconds": 120},
        ],
        "canary_interval": 5,
        "canary_timeout": 3,
    }
    return Inventory(tmp_path_factory.mktemp("inv") / "inventory.py", host.record, base)


def complete(host: Host, port: int, timeout: int = 90) -> tuple[int, str, float]:
    """(HTTP status, the X-Standin-Container that answered, curl's seconds) of one completion
    through the public port."""
    body = json.dumps({"model": MODEL, "prompt": "Hi", "max_tokens": 1})
    out = host.run(
        f"curl -s -m {timeout} -D - -o /dev/null -w '%{{http_code}} %{{time_total}}' "
        f"-H 'Content-Type: application/json' -d '{body}' http://127.0.0.1:{port}/v1/completions",
        check=False,
        timeout=timeout + 10,
    )
    lines = out.replace("\r\n", "\n").rstrip("\n").splitlines()
    code, _, seconds = (lines[-1] if lines else "").rpartition(" ")
    container = ""
    for line in lines:
        name, _, value = line.partition(":")
        if name.lower() == "x-standin-container":
            container = value.strip()
    status = code.split()[-1] if code.split() else "0"
    return int(status) if status.isdigit() else 0, container, float(seconds or 0)


def test_apply_installs_sockets_and_starts_no_replica(host: Host, inventory: Inventory) -> None:
    code, report, stderr = apply(inventory)
    assert code == 0, stderr
    result = host_report(report, inventory)
    assert result["vram"]["fits"] is True  # 0.9 + 0.9 on GPU 0 fit only as one swap group
    check = result["verification"]
    assert check["ok"], check
    units = {u["unit"] for u in check["units"]}
    assert {f"gpuprov-vllm-{n}.socket" for n in ("solo", "swap-a", "swap-b")} <= units
    for name in ("solo", "swap-a", "swap-b"):
        assert host.active(f"gpuprov-vllm-{name}.socket")
        enabled = host.run(f"systemctl is-enabled gpuprov-vllm-{name}.service", check=False)
        assert enabled.strip() == "static"  # no [Install]: only its socket starts it
        host.run(f"systemd-analyze verify /etc/systemd/system/gpuprov-vllm-{name}.service")
    unit = host.run("cat /etc/systemd/system/gpuprov-vllm-solo.service")
    assert "127.0.0.1:18601:8000" in unit  # published on loopback, behind the socket
    # apply's check went through each socket; the replica it woke stops after its idle time
    wait_for("solo idle again", lambda: state(host, "gpuprov-vllm-solo.service") == "inactive", 60)


def test_the_first_request_wakes_the_replica_and_idle_stops_it(host: Host) -> None:
    wait_for("solo stopped", lambda: state(host, "gpuprov-vllm-solo.service") == "inactive", 60)
    assert host.run(f"pgrep -f -- '{SOLO_RUN}'", check=False).strip() == ""
    status, container, seconds = complete(host, 8601)
    assert (status, container) == (200, "gpuprov-vllm-solo")
    print(f"\nwake through the socket: {seconds:.2f}s to the first completion")
    pid = host.main_pid("gpuprov-vllm-solo.service")
    assert complete(host, 8601)[:2] == (200, "gpuprov-vllm-solo")
    assert host.main_pid("gpuprov-vllm-solo.service") == pid  # awake: the same replica answered
    waited = wait_for(
        "solo stopped after its idle time",
        lambda: state(host, "gpuprov-vllm-solo.service") == "inactive",
        IDLE + 30,
    )
    assert waited >= IDLE - 1
    # ExecStop stopped the container, and the socket still listens
    assert host.run(f"pgrep -f -- '{SOLO_RUN}'", check=False).strip() == ""
    assert host.active("gpuprov-vllm-solo.socket")
    assert complete(host, 8601)[:2] == (200, "gpuprov-vllm-solo")  # and wakes again


def test_a_swap_group_runs_one_member_at_a_time(host: Host) -> None:
    """Alternating requests: every one is answered by the member asked for, and at most one
    member's container ever runs (sampled every 0.1 s on the host)."""
    host.run(
        f"nohup sh -c 'while :; do pgrep -c -f -- \"{SWAP_RUN}\"; sleep 0.1; done'"
        " > /run/members.log 2>&1 & echo $! > /run/members.pid"
    )
    swaps = []
    try:
        began = time.monotonic()
        for port, name in ((8602, "swap-a"), (8603, "swap-b")) * 3 + ((8602, "swap-a"),):
            status, container, seconds = complete(host, port)
            assert (status, container) == (200, f"gpuprov-vllm-{name}")
            swaps.append(seconds)
        elapsed = time.monotonic() - began
    finally:
        host.run("kill $(cat /run/members.pid) || true", check=False)
    counts = [int(n) for n in host.run("cat /run/members.log").split() if n.isdigit()]
    assert counts and max(counts) <= 1, counts
    print(f"\nvLLM swap latency: {', '.join(f'{s:.2f}s' for s in swaps[1:])} ({elapsed:.1f}s)")
    assert state(host, "gpuprov-vllm-swap-b.service") == "inactive"
    assert state(host, "gpuprov-vllm-swap-a.service") == "active"


def test_the_canary_calls_an_idle_replica_idle_and_never_starts_it(host: Host) -> None:
    wait_canary_idle(host, "gpuprov-vllm-solo.service")
    time.sleep(6)  # another canary run: it must not wake solo
    assert state(host, "gpuprov-vllm-solo.service") == "inactive"
    log = host.run("journalctl -q -u gpuprov-canary.service --no-pager -o cat")
    for name in ("solo", "swap-a", "swap-b"):
        unit = f"gpuprov-vllm-{name}.service"
        assert f"restarting {unit}" not in log and f"starting {unit} again" not in log, log
        assert f"{unit}: FAILING" not in log, log


def test_status_shows_the_idle_replica_as_idle(host: Host, inventory: Inventory) -> None:
    wait_for("solo idle", lambda: state(host, "gpuprov-vllm-solo.service") == "inactive", 60)
    done = gpuprov("status", str(inventory.write()), "--json", timeout=300)
    report = json.loads(done.stdout)
    [found] = report["hosts"]
    services = {s["service"]: s for s in found["services"]}
    assert services["solo"]["state"] == "idle (on demand)", services["solo"]
    assert services["solo"]["drift"] == [], services["solo"]
    assert found["stale"] == []  # sockets and proxies are the replicas' own


def test_a_replica_removed_takes_its_socket_and_proxy(host: Host, inventory: Inventory) -> None:
    code, _, stderr = apply(inventory, vllm_replicas=[{**A, "idle_seconds": 120}])
    assert code == 0, stderr
    for unit in ("solo.service", "solo.socket", "solo-proxy.service", "swap-b.socket"):
        assert not host.ok(f"test -e /etc/systemd/system/gpuprov-vllm-{unit}"), unit
    assert not host.ok("test -e /etc/gpuprov/vllm/solo.env")
    refused = host.run(
        "curl -s -m 5 -o /dev/null -w '%{http_code}' http://127.0.0.1:8601/health", check=False
    )
    assert refused.strip() == "000"  # nothing listens on the port any more
    assert host.active("gpuprov-vllm-swap-a.socket")
