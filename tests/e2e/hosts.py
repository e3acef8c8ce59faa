"""Shell access to a test host, and running gpuprov against it, for the end-to-end tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from provision import lock
from provision.testhost import hosts
from tests.support import standins, tiny_gguf

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
GPUS_580 = FIXTURES / "standin" / "gpus" / "dual_rtx3090_580.json"
GPUS_570 = FIXTURES / "standin" / "gpus" / "dual_rtx3090_570.json"
DOCKER_INFO = FIXTURES / "real" / "docker_info_json__llamaland_fedora41_nvidia-runtime-cdi.json"
IMAGES = sorted((FIXTURES / "images").glob("*.json"))
# What every vLLM test host's inventory sets: the stand-in docker, the release whose published
# environment the image catalog holds, and no toolkit install (NVIDIA's repository is out of
# reach here; the recorded `docker info` already lists the nvidia runtime).
VLLM_BASE = {
    "vllm_engine": "/usr/local/bin/docker",
    "vllm_version": "v0.23.0",
    "nvidia_container_toolkit_install": False,
}
GPUPROV = [str(Path(sys.executable).parent / "gpuprov")]


class Host:
    """Shell access to the test host, for assertions."""

    def __init__(self, record: hosts.TestHost) -> None:
        self.record = record

    def run(self, command: str, check: bool = True, timeout: float = 60) -> str:
        done = subprocess.run(
            hosts.ssh_command(self.record, command),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"{command!r} failed ({done.returncode}): {done.stderr}")
        return done.stdout

    def ok(self, command: str) -> bool:
        return subprocess.run(hosts.ssh_command(self.record, command)).returncode == 0

    def main_pid(self, unit: str) -> int:
        return int(self.run(f"systemctl show -p MainPID --value {unit}").strip())

    def active(self, unit: str) -> bool:
        return self.run(f"systemctl is-active {unit}", check=False).strip() == "active"

    def get(self, port: int, path: str) -> str:
        return self.run(f"curl -s -m 5 http://127.0.0.1:{port}{path}", check=False)

    def complete(self, port: int) -> dict[str, Any]:
        body = json.dumps({"prompt": "Hi", "n_predict": 4})
        out = self.run(
            f"curl -s -m 10 -H 'Content-Type: application/json' -d '{body}' "
            f"http://127.0.0.1:{port}/completion"
        )
        return dict(json.loads(out))


@contextmanager
def lock_held_by(host: Host, holder: str) -> Iterator[None]:
    """Another apply's lock holder on the host: flock on the lock file, naming itself there."""
    host.run(f"mkdir -p {os.path.dirname(lock.PATH)}")
    host.run(
        f"setsid flock -o {lock.PATH} sh -c 'echo {holder} > {lock.PATH}; exec sleep 600'"
        " </dev/null >/dev/null 2>&1 & echo $! > /run/gpuprov-other.pid"
    )
    time.sleep(1)
    try:
        yield
    finally:
        host.run("kill -- -$(cat /run/gpuprov-other.pid); rm -f /run/gpuprov-other.pid")


def unit_state(host: Host, unit: str) -> str:
    """systemd's ActiveState of `unit` on the test host."""
    return host.run(f"systemctl show -p ActiveState --value {unit}").strip()


def wait_canary_idle(host: Host, unit: str) -> str:
    """Waits until `unit` is stopped and the canary has called it idle; the canary's log."""
    wait_for(f"{unit} idle", lambda: unit_state(host, unit) == "inactive", 60)

    def canary_log() -> str:
        return host.run("journalctl -q -u gpuprov-canary.service --no-pager -o cat", check=False)

    called_idle = f"{unit}: idle (on demand"
    wait_for("the canary calling it idle", lambda: called_idle in canary_log(), 30, step=1)
    return canary_log()


def wait_for(what: str, check: Callable[[], bool], timeout: float, step: float = 0.5) -> float:
    """Seconds until `check()` held; fails the test after `timeout`."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if check():
            return time.monotonic() - began
        time.sleep(step)
    raise AssertionError(f"{what}: not within {timeout}s")


class Inventory:
    """Writes the inventory file the tests apply, from a base and per-test changes."""

    def __init__(self, path: Path, record: hosts.TestHost, base: dict[str, Any]) -> None:
        self.path = path
        name, data = hosts.pyinfra_host(record)
        self.name = name
        self.data = {**data, **base}

    def write(self, **changes: Any) -> Path:
        data = {**self.data, **changes}
        self.path.write_text(f"hosts = [({self.name!r}, {data!r})]\n")
        return self.path


def gpuprov(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(
        [*GPUPROV, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=timeout,
        stdin=subprocess.DEVNULL,  # no terminal: nothing may wait for an answer
    )
    sys.stderr.write(done.stderr[-4000:])
    return done


def apply(
    inventory: Inventory, *args: str, settle: float = 3, **changes: Any
) -> tuple[int, dict[str, Any], str]:
    """`gpuprov apply -y --json` with the inventory's data changed by `changes`; a short settle
    period keeps the suite quick (tests of the post-apply check pass their own)."""
    path = str(inventory.write(**changes))
    done = gpuprov("apply", path, "-y", "--json", "--settle", str(settle), *args)
    report = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
    return done.returncode, report, done.stderr


def host_report(report: dict[str, Any], inventory: Inventory) -> dict[str, Any]:
    return dict(report["hosts"][inventory.name])


def put_tiny_model(host: Host, folder: Path, path: str) -> None:
    """A tiny GGUF model written with the gguf package, copied to `path` on the host (0644)."""
    model = tiny_gguf.write(folder / "tiny.gguf")
    host.run(f"mkdir -p {os.path.dirname(path)}")
    subprocess.run(
        [
            "scp",
            *hosts.ssh_options(host.record.ssh_key, host.record.known_hosts),
            str(model),
            f"root@{host.record.address}:{path}",
        ],
        check=True,
    )
    host.run(f"chmod 644 {path}")


TINY_MODEL = "/srv/models/tiny.gguf"


def llama_host(make: Callable[[str], hosts.TestHost], name: str, folder: Path) -> Host:
    """Test host `name` (from the session's factory) with the tiny model at TINY_MODEL."""
    h = Host(make(name))
    put_tiny_model(h, folder, TINY_MODEL)
    return h


def vendored_source(sdist: Path) -> dict[str, str]:
    """Inventory settings that build the llama.cpp vendored in the llama-cpp-python sdist."""
    return {"llama_cpp_tarball": str(sdist), "llama_cpp_tarball_subdir": "vendor/llama.cpp"}


def vllm_host(make: Callable[[str], hosts.TestHost], name: str) -> Host:
    """Test host `name` with the stand-ins (tests/support/standins.py): `docker` serving the
    image catalog, `nvidia-smi` answering for two RTX 3090s on driver 580."""
    record = make(name)
    standins.install(record, gpus=GPUS_580, images=IMAGES, docker_info=DOCKER_INFO)
    return Host(record)
