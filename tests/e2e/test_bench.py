"""`gpuprov bench` end to end: a llama-server profile and the nginx balancer in front of two,
deployed by `gpuprov apply` on a real systemd test host and measured from here.

Real: the test host, llama.cpp built on it, llama-server serving the tiny GGUF model on
127.0.0.1 (so bench reaches it through `ssh -L` with the inventory's SSH data), nginx balancing
the two profiles, llama-server's own /metrics counting what each one served. Nothing is stubbed.
The tests run in order and share the host.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from checks.reporting import schema
from provision.testhost import hosts
from tests.e2e.hosts import (
    ROOT,
    TINY_MODEL,
    Host,
    Inventory,
    apply,
    host_report,
    llama_host,
    vendored_source,
    wait_for,
)

MODEL = TINY_MODEL
PORTS = {"alpha": 8081, "beta": 8082}
LISTEN = 8400
# The tiny model's vocabulary is mostly bytes: a short prompt keeps each request in its context.
LOAD = ["--prompt-tokens", "12", "--output-tokens", "16", "--requests-per-level", "6"]

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def host(testhost_factory: Callable[[str], hosts.TestHost], tmp_path_factory: Any) -> Host:
    return llama_host(testhost_factory, "e2e-bench", tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="module")
def inventory(host: Host, sdist: Path, tmp_path_factory: Any) -> Inventory:
    profile = {"model": MODEL, "ctx_size": 512, "extra_args": ["--metrics"]}
    base = {
        **vendored_source(sdist),
        "llama_server_profiles": [
            {**profile, "name": name, "port": port, "alias": "tiny"} for name, port in PORTS.items()
        ],
        "nginx_lb_enabled": True,
        "nginx_lb_listen": LISTEN,
        "nginx_lb_servers": [f"127.0.0.1:{port}" for port in PORTS.values()],
    }
    return Inventory(tmp_path_factory.mktemp("inv") / "inventory.py", host.record, base)


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    """`gpuprov bench`, in a process of its own."""
    done = subprocess.run(
        [str(Path(sys.executable).parent / "gpuprov"), "bench", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    sys.stderr.write(done.stderr[-4000:])
    return done


def predicted(host: Host, port: int) -> float:
    """llama-server's llamacpp:tokens_predicted_total on `port`."""
    text = host.get(port, "/metrics")
    found = re.search(r"^llamacpp:tokens_predicted_total\s+([0-9.e+]+)$", text, re.M)
    assert found, text[:400]
    return float(found.group(1))


def test_apply_serves_two_profiles_behind_the_balancer(host: Host, inventory: Inventory) -> None:
    code, report, stderr = apply(inventory)
    assert code == 0, stderr
    assert host_report(report, inventory)["verification"]["ok"]
    for port in PORTS.values():
        wait_for(f"/health on {port}", lambda p=port: '"ok"' in host.get(p, "/health"), 60)


def test_bench_of_a_profile_through_ssh(inventory: Inventory, tmp_path: Path) -> None:
    page = tmp_path / "alpha.html"
    done = bench(
        str(inventory.path), "alpha", "--concurrency", "1,2,4", *LOAD, "--json", "--html", str(page)
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    jsonschema.validate(data, schema.committed("bench"))
    target = data["target"]
    assert (target["service"], target["host"], target["model"]) == ("alpha", inventory.name, "tiny")
    assert target["reached_through"].startswith("ssh -L ")  # alpha listens on 127.0.0.1 there
    assert [lv["concurrency"] for lv in data["levels"]] == [1, 2, 4]
    for lv in data["levels"]:
        assert (lv["requests"], lv["succeeded"], lv["failed"]) == (6, 6, 0), lv["errors"]
        assert lv["output_tokens"] == 6 * 16  # ignore_eos: every request its full output
        assert lv["tokens_from"] in ("usage", "chunks")
        assert lv["ttft_ms"]["p50"] > 0 and lv["itl_ms"]["p50"] is not None
        assert lv["latency_ms"]["p90"] >= lv["ttft_ms"]["p90"]
        assert lv["aggregate_tok_s"] > 0
    assert data["verdict"]
    for level in (1, 2, 4):
        assert f"concurrency {level}: 6 requests ..." in done.stderr  # progress per level
    assert "<svg" in page.read_text()


def test_bench_of_the_balancer_reaches_both_profiles(host: Host, inventory: Inventory) -> None:
    before = {name: predicted(host, port) for name, port in PORTS.items()}
    done = bench(str(inventory.path), "balancer", "--concurrency", "1,2,4", *LOAD)
    assert done.returncode == 0, done.stderr
    print(done.stdout)  # the README's example
    assert re.search(r"^\s+4\s+6/6\s", done.stdout, re.M), done.stdout
    assert "verdict   " in done.stdout and "tokens    from " in done.stdout
    after = {name: predicted(host, port) for name, port in PORTS.items()}
    served = {name: after[name] - before[name] for name in PORTS}
    assert sum(served.values()) >= 3 * 6 * 16, served
    assert all(tokens > 0 for tokens in served.values()), served  # least_conn used both


def test_unknown_service_exits_2(inventory: Inventory) -> None:
    done = bench(str(inventory.path), "gamma")
    assert done.returncode == 2
    assert "no service 'gamma'; the inventory has: alpha" in done.stderr


def test_a_stopped_service_exits_2_with_the_reason(host: Host, inventory: Inventory) -> None:
    host.run("systemctl stop gpuprov-canary.timer gpuprov-llama-alpha.service")
    try:
        done = bench(str(inventory.path), "alpha", *LOAD)
        assert done.returncode == 2
        assert "the first request failed: " in done.stderr
        assert "does alpha run on" in done.stderr
    finally:
        host.run("systemctl start gpuprov-llama-alpha.service gpuprov-canary.timer")
