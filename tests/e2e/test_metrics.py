"""Prometheus metrics end to end: the canary's textfile scraped from the real node_exporter.

Real: the test host (systemd in podman), `gpuprov apply` with pyinfra, llama-server built from
the llama-cpp-python sdist serving a tiny model with --metrics, the canary timer, and Debian's
prometheus-node-exporter scraped with curl on :9100. The test host has no route to a mirror, so
the package (and adduser, which it needs) is fetched here with `apt-get download` and installed
with dpkg before the apply; the apply then finds it installed, points its textfile collector at
canary_metrics_dir and starts it. The GPU gauges come from the nvidia-smi stand-in
(tests/support/standin_nvidia_smi.py), put on the host after the last apply so that the gate and
the build never see it. The tests run in order and share one host.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from provision.testhost import hosts
from provision.testhost.state import state_dir
from tests.conftest import FIXTURES
from tests.e2e.hosts import Host, Inventory, apply, put_tiny_model, wait_for

MODEL = "/srv/models/tiny.gguf"
UNIT = "gpuprov-llama-alpha.service"
PORT = 8091
DEBS = "/mnt/gpuprov-debs"
TEXTFILE = "/var/lib/prometheus/node-exporter/gpuprov_canary.prom"
ROOT = Path(__file__).resolve().parent.parent.parent
GPUS = FIXTURES / "standin" / "gpus" / "dual_rtx3090_580.json"
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$")

pytestmark = pytest.mark.e2e


def debs() -> Path:
    """prometheus-node-exporter and adduser .debs, downloaded once into the test state dir."""
    folder = state_dir() / "debs"
    folder.mkdir(parents=True, exist_ok=True)
    for package in ("prometheus-node-exporter", "adduser"):
        if not list(folder.glob(f"{package}_*.deb")):
            subprocess.run(["apt-get", "download", package], cwd=folder, check=True)
    return folder


@pytest.fixture(scope="module")
def host(testhost_factory: Callable[..., hosts.TestHost], tmp_path_factory: Any) -> Host:
    record = testhost_factory("e2e-metrics", volumes=[(str(debs()), DEBS)])
    h = Host(record)
    put_tiny_model(h, tmp_path_factory.mktemp("model"), MODEL)
    if not h.ok("dpkg -s prometheus-node-exporter >/dev/null 2>&1"):
        h.run(f"dpkg -i {DEBS}/adduser_*.deb {DEBS}/prometheus-node-exporter_*.deb", timeout=120)
    return h


@pytest.fixture(scope="module")
def inventory(host: Host, sdist: Path, tmp_path_factory: Any) -> Inventory:
    base = {
        "llama_cpp_tarball": str(sdist),
        "llama_cpp_tarball_subdir": "vendor/llama.cpp",
        "llama_server_profiles": [
            {"name": "alpha", "model": MODEL, "port": PORT, "ctx_size": 256, "metrics": True}
        ],
        "canary_interval": 6,
        "canary_timeout": 3,
        "canary_node_exporter": True,
    }
    return Inventory(tmp_path_factory.mktemp("inv") / "inventory.py", host.record, base)


def samples(text: str) -> dict[tuple[str, str], float]:
    """(name, labels as written) -> value, for the gpuprov_ series of a scrape."""
    found = {}
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match and match.group(1).startswith("gpuprov_"):
            found[(match.group(1), match.group(2) or "")] = float(match.group(3))
    return found


def scrape(host: Host) -> dict[tuple[str, str], float]:
    return samples(host.run("curl -sf http://127.0.0.1:9100/metrics"))


ALPHA = f'{{kind="llama",service="alpha",unit="{UNIT}"}}'


def series(scraped: dict[tuple[str, str], float], name: str) -> float | None:
    return scraped.get((f"gpuprov_service_{name}", ALPHA))


def canary_log(host: Host) -> str:
    return host.run("journalctl -q -u gpuprov-canary.service -o cat --no-pager", check=False)


def test_apply_installs_node_exporter_reading_the_canarys_folder(
    host: Host, inventory: Inventory
) -> None:
    code, _, stderr = apply(inventory)
    assert code == 0, stderr
    assert host.active("prometheus-node-exporter.service")
    args = host.run("grep ^ARGS= /etc/default/prometheus-node-exporter").strip()
    assert args == 'ARGS="--collector.textfile.directory=/var/lib/prometheus/node-exporter"'
    assert "--metrics" in host.run("ps -o args= -C llama-server")


def test_node_exporter_serves_the_canarys_series_with_up_1(host: Host) -> None:
    wait_for("alpha up in a scrape", lambda: series(scrape(host), "up") == 1, 60, step=2)
    scraped = scrape(host)
    assert series(scraped, "loading") == 0
    assert series(scraped, "consecutive_failures") == 0
    assert series(scraped, "canary_restarts_total") == 0
    latency = series(scraped, "probe_latency_seconds")
    assert latency is not None and 0 < latency < 3
    metrics = host.run("curl -sf http://127.0.0.1:9100/metrics")
    assert "node_textfile_scrape_error 0" in metrics  # node_exporter read the file whole
    assert host.run(f"stat -c %a {TEXTFILE}").strip() == "644"


def test_llama_servers_own_metrics_answer(host: Host) -> None:
    text = host.run(f"curl -sf http://127.0.0.1:{PORT}/metrics")
    assert "# TYPE llamacpp:" in text, text[:500]


def test_kill_9_shows_as_systemds_restart_then_up_again(host: Host) -> None:
    before = scrape(host)
    restarts = series(before, "systemd_restarts")
    assert restarts is not None
    pid = host.main_pid(UNIT)
    since = host.run("date '+%Y-%m-%d %H:%M:%S'").strip()
    host.run(f"kill -9 {pid}")

    def recovered() -> bool:
        now = scrape(host)
        return series(now, "systemd_restarts") == restarts + 1 and series(now, "up") == 1

    wait_for("the restart by systemd, then up, in a scrape", recovered, 60, step=2)
    after = scrape(host)
    log = host.run(
        f"journalctl -q -u gpuprov-canary.service -o cat --no-pager --since '{since}'", check=False
    )
    assert f"restarting {UNIT}" not in log  # systemd restarted it, not the canary
    assert series(after, "canary_restarts_total") == 0
    assert series(after, "consecutive_failures") == 0  # it is up again
    journal = host.run(f"journalctl -q -u {UNIT} -o cat --no-pager --since '{since}'", check=False)
    assert f"restart counter is at {int(restarts) + 1}" in journal  # systemd's own word


def test_a_hung_server_counts_failures_then_the_canarys_restart(host: Host) -> None:
    pid = host.main_pid(UNIT)
    seen: set[float] = set()

    def restarted() -> bool:
        now = scrape(host)
        seen.add(series(now, "consecutive_failures") or 0)
        return series(now, "canary_restarts_total") == 1

    host.run(f"kill -STOP {pid}")
    try:
        wait_for("the canary's restart in a scrape", restarted, 90, step=1)
    finally:
        host.run(f"kill -CONT {pid}", check=False)
    log = canary_log(host)
    assert log.count(f"restarting {UNIT}") == 1
    assert "1 of 2 before a restart" in log
    assert 1 in seen  # the first failure showed before the restart
    wait_for("up again", lambda: series(scrape(host), "up") == 1, 60, step=2)
    assert series(scrape(host), "consecutive_failures") == 0
    assert (host.run(f"cat /var/lib/gpuprov/canary/{UNIT}.restarts").strip()) == "1"


def test_gpu_gauges_from_the_nvidia_smi_standin(host: Host) -> None:
    """After the last apply: the stand-in answers --query-gpu (it does not cover
    --query-compute-apps, so no per-process series)."""
    script = (ROOT / "tests" / "support" / "standin_nvidia_smi.py").read_text()
    host.run(f"cat > /usr/bin/nvidia-smi <<'EOF'\n{script}\nEOF\nchmod 755 /usr/bin/nvidia-smi")
    host.run(
        f"mkdir -p /etc/standin-nvidia-smi && cat > /etc/standin-nvidia-smi/gpus.json "
        f"<<'EOF'\n{GPUS.read_text()}\nEOF"
    )
    labels = (
        '{gpu="0",name="NVIDIA GeForce RTX 3090",uuid="GPU-00000000-0000-0000-0000-000000003090"}'
    )

    def gauges() -> bool:
        return ("gpuprov_gpu_memory_total_bytes", labels) in scrape(host)

    try:
        wait_for("GPU gauges in a scrape", gauges, 40, step=2)
        scraped = scrape(host)
        assert scraped[("gpuprov_gpu_memory_total_bytes", labels)] == 24576 * 1024 * 1024
        assert scraped[("gpuprov_gpu_power_watts", labels)] == 21.35
        assert scraped[("gpuprov_gpu_temperature_celsius", labels)] == 34
        assert not [k for k in scraped if k[0] == "gpuprov_gpu_process_memory_used_bytes"]
        assert series(scraped, "up") == 1
    finally:
        host.run("rm -f /usr/bin/nvidia-smi", check=False)
