"""The nvidia_container_toolkit role (docker mode) applied by pyinfra to a real systemd test host.

Real: the test host (systemd as PID 1, its own network namespace, SSH), pyinfra's ssh connector,
the role's operations, gpuprov-ctk-configure.sh under the host's /bin/sh, `systemctl restart
docker` restarting a real unit, and the post-check running the container probes over SSH.
Stand-ins: no GPU, no NVIDIA repository and no Docker daemon can be had on a test host, so
`nvidia-ctk` (edits daemon.json as the real one does), the docker.service unit (a process that
loads /etc/docker/daemon.json when it starts and counts its starts) and `docker` (answers
`docker info` from what that process loaded) are stand-ins installed on the host.
"""

from __future__ import annotations

import contextlib
import importlib.util
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from pyinfra.api.command import QuoteString, StringCommand
from pyinfra.api.config import Config
from pyinfra.api.connect import connect_all, disconnect_all
from pyinfra.api.deploy import add_deploy
from pyinfra.api.exceptions import PyinfraError
from pyinfra.api.inventory import Inventory
from pyinfra.api.operations import run_ops
from pyinfra.api.state import State

from provision import stack, toolkit
from provision.gate import HostGate
from provision.hostplan import HostPlan
from provision.testhost import hosts
from tests.support import ansible_play

pytestmark = pytest.mark.e2e

ROLE = Path(__file__).resolve().parents[2] / "roles" / "nvidia_container_toolkit"
STARTS = "/var/lib/fake-dockerd/starts"

NVIDIA_CTK = """#!/usr/bin/python3
import json, os, sys

args = sys.argv[1:]
if args == ["--version"]:
    print("NVIDIA Container Toolkit CLI version 1.17.8")
    print("commit: f202b80a9b9d0db00d9b1d73c0128c8962c55f4d")
elif args[:2] == ["runtime", "configure"] and "--runtime=docker" in args:
    path = next(a.split("=", 1)[1] for a in args if a.startswith("--config="))
    config = json.load(open(path)) if os.path.exists(path) else {}
    config.setdefault("runtimes", {})["nvidia"] = {"args": [], "path": "nvidia-container-runtime"}
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(json.dumps(config, indent=4, sort_keys=True))
    print(f"INFO[0000] Wrote updated config to {path}", file=sys.stderr)
else:
    sys.exit(f"stand-in nvidia-ctk: unexpected {args}")
"""

DOCKERD = """#!/usr/bin/python3
import os, signal, sys, time

os.makedirs("/run/fake-dockerd", exist_ok=True)
os.makedirs("/var/lib/fake-dockerd", exist_ok=True)
try:
    config = open("/etc/docker/daemon.json").read()
except FileNotFoundError:
    config = "{}"
open("/run/fake-dockerd/loaded.json", "w").write(config)
with open("/var/lib/fake-dockerd/starts", "a") as f:
    f.write("start\\n")


def stop(*_):
    os.remove("/run/fake-dockerd/loaded.json")
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
while True:
    time.sleep(3600)
"""

DOCKER = """#!/usr/bin/python3
import json, sys

args = sys.argv[1:]
try:
    loaded = json.load(open("/run/fake-dockerd/loaded.json"))
except FileNotFoundError:
    print("Cannot connect to the Docker daemon at unix:///var/run/docker.sock."
          " Is the docker daemon running?", file=sys.stderr)
    sys.exit(1)
runtimes = {"io.containerd.runc.v2": {"path": "runc"}, "runc": {"path": "runc"}}
runtimes.update(loaded.get("runtimes", {}))
fmt = args[args.index("--format") + 1] if "--format" in args else ""
if fmt == "{{json .Runtimes}}":
    print(json.dumps(runtimes))
elif fmt == "{{json .}}":
    print(json.dumps({"ServerVersion": "28.2.2", "ClientInfo": {"Version": "28.2.2"},
                      "Runtimes": runtimes, "DefaultRuntime": "runc", "SecurityOptions": []}))
else:
    sys.exit(f"stand-in docker: unexpected {args}")
"""

UNIT = """[Unit]
Description=Stand-in Docker daemon (loads /etc/docker/daemon.json when it starts)

[Service]
ExecStart=/usr/local/bin/fake-dockerd
"""

STANDINS = {
    "/usr/local/bin/nvidia-ctk": (NVIDIA_CTK, "755"),
    "/usr/local/bin/fake-dockerd": (DOCKERD, "755"),
    "/usr/local/bin/docker": (DOCKER, "755"),
    "/etc/systemd/system/docker.service": (UNIT, "644"),
}


def load_role() -> ModuleType:
    name = "gpuprov_roles.nvidia_container_toolkit"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROLE / "tasks" / f"{ROLE.name}.py")
        assert spec and spec.loader
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


@pytest.fixture(scope="module")
def record(testhost_factory: Callable[..., hosts.TestHost]) -> hosts.TestHost:
    """A fresh host with the stand-ins installed and the stand-in docker.service running."""
    made = testhost_factory("ctk1")
    for path, (text, mode) in STANDINS.items():
        ssh(made, f"mkdir -p {path.rsplit('/', 1)[0]} && cat > {path} && chmod {mode} {path}", text)
    ssh(made, "rm -rf /etc/docker /var/lib/fake-dockerd /usr/local/lib/gpuprov")
    ssh(made, "systemctl daemon-reload && systemctl restart docker")
    return made


def ssh(host: hosts.TestHost, command: str, stdin: str = "") -> str:
    done = subprocess.run(
        hosts.ssh_command(host, command),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"{command}: {done.stderr}"
    return done.stdout


def apply(host: hosts.TestHost) -> list[tuple[str, str]]:
    """Gather the container facts over SSH, plan the role, run it: (operation, status) pairs."""
    name, data = hosts.pyinfra_host(host)
    inventory = Inventory(([(name, data)], {}))  # type: ignore[no-untyped-call]
    state = State(inventory, Config())  # type: ignore[no-untyped-call]
    connect_all(state)
    try:
        target = inventory.get_host(name)
        _, output = target.run_shell_command(
            StringCommand("sh", "-c", QuoteString(toolkit.PROBE_SCRIPT))
        )
        facts = toolkit.fresh_facts("\n".join(line.line for line in output) + "\n", name)
        plan = HostPlan(name, stack.from_data({}), stack.variables({}), HostGate(name, facts))
        add_deploy(state, load_role().nvidia_container_toolkit, plan)
        with contextlib.suppress(PyinfraError):  # a failed host; reported by its operations
            run_ops(state)
        return [
            (
                sorted(state.get_op_meta(op_hash).names)[0].rsplit(" | ", 1)[-1],
                status(state.ops[target][op_hash].operation_meta),
            )
            for op_hash in state.get_op_order()  # type: ignore[no-untyped-call]
        ]
    finally:
        disconnect_all(state)


def status(meta: Any) -> str:
    if not meta.is_complete():
        return "not run"
    if not meta.did_succeed(_raise_if_not_complete=False):
        return "failed"
    return "changed" if meta.did_change() else "unchanged"


def ansible(record: hosts.TestHost, folder: Path, *args: str) -> tuple[int, str]:
    """The Ansible role on the host (the gate skipped: no GPU here); exit code and output."""
    done = ansible_play.run_roles(
        record,
        folder,
        ["nvidia_container_toolkit"],
        {"gpuprov_check_skip": True, "nvidia_container_toolkit_install": False},
        *args,
    )
    return done.returncode, done.stdout + done.stderr


def test_ansible_check_mode_plans_the_runtime_and_changes_nothing(
    record: hosts.TestHost, tmp_path: Path
) -> None:
    """`--check --diff` before the runtime is registered: it would register it, and does not
    hold Docker to a runtime it did not register (no false CTR-005); nothing on the host moves."""
    code, out = ansible(record, tmp_path, "--check", "--diff")
    assert code == 0, out[-4000:]
    assert "CTR-005" not in out
    assert "Configure Docker" in out and ansible_play.recap_changed(out) > 0
    assert not ssh(record, "ls /etc/docker 2>/dev/null || true").strip()
    assert ssh(record, f"cat {STARTS}").splitlines() == ["start"]


def test_first_apply_registers_the_runtime_and_restarts_docker_once(
    record: hosts.TestHost,
) -> None:
    assert ssh(record, f"cat {STARTS}").splitlines() == ["start"]
    assert apply(record) == [
        ("Install the Docker configuration script", "changed"),
        ("Register the nvidia runtime with Docker", "changed"),
        ("Check that containers reach the GPU (CTR-004, CTR-005)", "changed"),
    ]
    assert '"nvidia"' in ssh(record, "cat /etc/docker/daemon.json")
    assert ssh(record, f"cat {STARTS}").splitlines() == ["start", "start"]
    assert '"nvidia"' in ssh(record, "docker info --format '{{json .Runtimes}}'")


def test_second_apply_adds_nothing(record: hosts.TestHost) -> None:
    assert apply(record) == []
    assert ssh(record, f"cat {STARTS}").splitlines() == ["start", "start"]


def test_ansible_finds_the_runtime_registered(record: hosts.TestHost, tmp_path: Path) -> None:
    for args in ((), ("--check", "--diff")):
        code, out = ansible(record, tmp_path, *args)
        assert code == 0, out[-4000:]
        assert ansible_play.recap_changed(out) == 0, out[-4000:]
    assert ssh(record, f"cat {STARTS}").splitlines() == ["start", "start"]


def test_the_script_alone_reports_unchanged_on_the_host(record: hosts.TestHost) -> None:
    out = ssh(record, toolkit.configure_command("/etc/docker/daemon.json"))
    assert out.splitlines()[-1] == "unchanged"
    assert ssh(record, f"cat {STARTS}").splitlines() == ["start", "start"]


def test_a_failing_check_fails_the_host(
    record: hosts.TestHost, caplog: pytest.LogCaptureFixture
) -> None:
    """A daemon without the runtime and an nvidia-ctk that does not add it: the script runs and
    restarts Docker, and the post-check fails the host, naming CTR-005."""
    broken = NVIDIA_CTK.replace('config.setdefault("runtimes", {})["nvidia"] = ', "_ = ")
    ssh(record, "cat > /usr/local/bin/nvidia-ctk", broken)
    ssh(record, "echo '{}' > /etc/docker/daemon.json && systemctl restart docker")
    try:
        assert apply(record)[-1] == (
            "Check that containers reach the GPU (CTR-004, CTR-005)",
            "failed",
        )
    finally:
        ssh(record, "cat > /usr/local/bin/nvidia-ctk", NVIDIA_CTK)
    assert "the NVIDIA Container Toolkit is set up but containers still cannot" in caplog.text
    assert "CTR-005 Docker is not configured with the nvidia runtime" in caplog.text
