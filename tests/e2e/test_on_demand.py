"""On-demand servers and swap groups end to end, with systemd's own parts, on a real test host.

Real: systemd (a .socket unit owns each public port, systemd-socket-proxyd forwards once the
server is ready and exits when idle, StopWhenUnneeded= stops the server, Conflicts= swaps group
members), llama-server built CPU-only serving the tiny model, the canary. The tests run in order
on one host; what they measure (wake overhead, swap latency) is printed.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from provision.testhost import hosts
from tests.e2e.hosts import (
    TINY_MODEL,
    Host,
    Inventory,
    apply,
    host_report,
    llama_host,
    vendored_source,
    wait_canary_idle,
    wait_for,
)
from tests.e2e.hosts import (
    unit_state as state,
)

pytestmark = pytest.mark.e2e

MODEL = TINY_MODEL
SOLO = {"name": "solo", "model": MODEL, "port": 8091, "ctx_size": 256}
A = {"name": "swap-a", "model": MODEL, "port": 8092, "ctx_size": 256, "swap_group": "pair"}
B = {"name": "swap-b", "model": MODEL, "port": 8093, "ctx_size": 256, "swap_group": "pair"}
IDLE = 6


@pytest.fixture(scope="module")
def host(testhost_factory: Callable[[str], hosts.TestHost], tmp_path_factory: Any) -> Host:
    return llama_host(testhost_factory, "e2e-demand", tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="module")
def inventory(host: Host, sdist: Path, tmp_path_factory: Any) -> Inventory:
    base = {
        **vendored_source(sdist),
        "llama_server_profiles": [
            {**SOLO, "residency": "on_demand", "idle_seconds": IDLE},
            {**A, "idle_seconds": 120},
            {**B, "idle_seconds": 120},
        ],
        "canary_interval": 5,
        "canary_timeout": 5,
    }
    return Inventory(tmp_path_factory.mktemp("inv") / "inventory.py", host.record, base)


def complete(host: Host, port: int, timeout: int = 120) -> tuple[dict[str, Any], float]:
    """One completion through the public port, and how long it took (seconds, curl's clock)."""
    body = json.dumps({"prompt": "Hi", "n_predict": 2})
    out = host.run(
        f"curl -s -m {timeout} -w '\\n%{{time_total}}' -H 'Content-Type: application/json' "
        f"-d '{body}' http://127.0.0.1:{port}/completion",
        timeout=timeout + 10,
    )
    text, _, seconds = out.rstrip("\n").rpartition("\n")
    return dict(json.loads(text)), float(seconds)


def servers(host: Host) -> int:
    return int(host.run("pgrep -c -x llama-server", check=False).strip() or 0)


def load_seconds(host: Host, unit: str) -> float:
    """The server's own start: from its process starting to its unit being active (ready)."""
    props = host.run(
        f"systemctl show -p ExecMainStartTimestampMonotonic,ActiveEnterTimestampMonotonic {unit}"
    )
    values = {k: int(v) for k, v in (line.split("=", 1) for line in props.split())}
    ready, started = (
        values["ActiveEnterTimestampMonotonic"],
        values["ExecMainStartTimestampMonotonic"],
    )
    return (ready - started) / 1e6


def test_apply_installs_sockets_and_starts_no_server(host: Host, inventory: Inventory) -> None:
    code, report, stderr = apply(inventory)
    assert code == 0, stderr
    check = host_report(report, inventory)["verification"]
    assert check["ok"], check
    units = {u["unit"] for u in check["units"]}
    assert {"gpuprov-llama-solo.socket", "gpuprov-llama-swap-a.socket"} <= units
    for name in ("solo", "swap-a", "swap-b"):
        assert host.active(f"gpuprov-llama-{name}.socket")
        enabled = host.run(f"systemctl is-enabled gpuprov-llama-{name}.service", check=False)
        assert enabled.strip() == "static"  # no [Install]: only its socket starts it
        host.run(f"systemd-analyze verify /etc/systemd/system/gpuprov-llama-{name}.service")
    # apply's check went through each socket; the servers it woke stop after their idle time.
    wait_for("solo idle again", lambda: state(host, "gpuprov-llama-solo.service") == "inactive", 60)


def test_the_first_request_wakes_the_server_and_idle_stops_it(host: Host) -> None:
    wait_for("solo stopped", lambda: state(host, "gpuprov-llama-solo.service") == "inactive", 60)
    assert "solo" not in host.run("ps -eo args | grep -c 'port 10091' || true")
    reply, total = complete(host, 8091)
    assert reply["tokens_predicted"] >= 1
    load = load_seconds(host, "gpuprov-llama-solo.service")
    print(f"\nwake: {total:.2f}s for the first completion, the server's own start {load:.2f}s, "
          f"overhead {total - load:.2f}s")  # fmt: skip
    assert total - load < 1.0, (total, load)
    pid = host.main_pid("gpuprov-llama-solo.service")
    complete(host, 8091)
    assert host.main_pid("gpuprov-llama-solo.service") == pid  # awake: the same server answered
    waited = wait_for(
        "solo stopped after its idle time",
        lambda: state(host, "gpuprov-llama-solo.service") == "inactive",
        IDLE + 30,
    )
    assert waited >= IDLE - 1
    assert host.run("pgrep -f 'port 10091'", check=False).strip() == ""
    reply, _ = complete(host, 8091)  # and wakes again
    assert reply["tokens_predicted"] >= 1


def test_a_swap_group_runs_one_member_at_a_time(host: Host) -> None:
    """Alternating requests: every one answers, at most one member's server ever runs (sampled
    every 0.1 s on the host), eight swaps within 30 s."""
    wait_for("solo idle", lambda: state(host, "gpuprov-llama-solo.service") == "inactive", 60)
    host.run(
        "nohup sh -c 'while :; do pgrep -c -x llama-server; sleep 0.1; done'"
        " > /run/servers.log 2>&1 &"
    )
    swaps = []
    try:
        began = time.monotonic()
        for port in (8092, 8093) * 4 + (8092,):  # 8 swaps: more than a start limit allows
            reply, seconds = complete(host, port)
            assert reply["tokens_predicted"] >= 1
            swaps.append(seconds)
        elapsed = time.monotonic() - began
    finally:
        host.run("pkill -f 'pgrep -c -x llama-server' || true", check=False)
    counts = [int(n) for n in host.run("cat /run/servers.log").split() if n.isdigit()]
    assert counts and max(counts) <= 1, counts
    print(f"\nswap latency (request for the other member -> its completion): "
          f"{', '.join(f'{s:.2f}s' for s in swaps[1:])}; 8 swaps in {elapsed:.1f}s")  # fmt: skip
    assert elapsed < 30
    assert state(host, "gpuprov-llama-swap-b.service") == "inactive"
    assert state(host, "gpuprov-llama-swap-a.service") == "active"


def test_kill_9_during_a_swap_recovers(host: Host) -> None:
    """The server being woken is killed while it loads: systemd restarts it (on failure), or
    the request fails and the next one starts it; either way the member serves again."""
    host.run(
        'nohup sh -c \'for i in $(seq 1 100); do p=$(pgrep -f "port 10093"); '
        '[ -n "$p" ] && kill -9 $p && break; sleep 0.05; done\' >/dev/null 2>&1 &'
    )
    with contextlib.suppress(AssertionError, ValueError):  # cut by the kill: the next one works
        complete(host, 8093, timeout=60)
    reply, _ = complete(host, 8093)
    assert reply["tokens_predicted"] >= 1
    assert state(host, "gpuprov-llama-swap-a.service") == "inactive"


def test_the_canary_never_restarts_what_was_stopped_on_purpose(host: Host) -> None:
    log = wait_canary_idle(host, "gpuprov-llama-solo.service")
    for name in ("solo", "swap-a", "swap-b"):
        unit = f"gpuprov-llama-{name}.service"
        assert f"restarting {unit}" not in log and f"starting {unit} again" not in log, log
        assert f"{unit}: FAILING" not in log, log
