"""`gpuprov apply` as an ordinary SSH user with passwordless sudo, and as one without sudo.

Real: a fresh systemd test host reached over SSH as `gpuprov-ops` (in sudoers, NOPASSWD) with
`_sudo: True`; the llama.cpp stack built CPU-only from the vendored source and served, then the
vLLM stack with the stand-in `docker` and `nvidia-smi` of tests/support (no Docker engine and no
GPU here). Every command, probes and the apply lock included, runs through sudo. A second user,
`gpuprov-nosudo`, has no sudo rights: apply must refuse the host with one message and change
nothing. The tests run in order on one host.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from provision import lock
from provision.testhost import hosts
from tests.e2e.hosts import (
    DOCKER_INFO,
    GPUPROV,
    GPUS_580,
    IMAGES,
    ROOT,
    VLLM_BASE,
    Host,
    Inventory,
    apply,
    gpuprov,
    host_report,
    lock_held_by,
    put_tiny_model,
)
from tests.e2e.test_apply_llama import MODEL
from tests.e2e.test_apply_vllm import REPLICA
from tests.support import standins

pytestmark = pytest.mark.e2e

OPS = "gpuprov-ops"
NOSUDO = "gpuprov-nosudo"
LLAMA_UNIT = "gpuprov-llama-solo.service"
VLLM_UNIT = "gpuprov-vllm-qwen-1.service"


def _user(host: Host, name: str, sudo: bool) -> None:
    """A login user with the test key; in sudoers (NOPASSWD) when `sudo`."""
    host.run(
        f"id {name} >/dev/null 2>&1 || useradd -m -s /bin/bash {name}; "
        f"install -d -m 700 -o {name} -g {name} /home/{name}/.ssh; "
        f"install -m 600 -o {name} -g {name} /root/.ssh/authorized_keys "
        f"/home/{name}/.ssh/authorized_keys"
    )
    if sudo:
        rule = f"{name} ALL=(ALL) NOPASSWD:ALL"
        host.run(f"echo '{rule}' > /etc/sudoers.d/{name} && chmod 440 /etc/sudoers.d/{name}")


@pytest.fixture(scope="module")
def host(testhost_factory: Callable[[str], hosts.TestHost], tmp_path_factory: Any) -> Host:
    record = testhost_factory("e2e-sudo")
    h = Host(record)
    _user(h, OPS, sudo=True)
    _user(h, NOSUDO, sudo=False)
    put_tiny_model(h, tmp_path_factory.mktemp("model"), MODEL)
    return h


def _inventory(host: Host, tmp: Path, user: str, base: dict[str, Any]) -> Inventory:
    inventory = Inventory(tmp / f"{user}.py", host.record, base)
    inventory.data.update({"ssh_user": user, "_sudo": True})
    return inventory


@pytest.fixture(scope="module")
def llama(host: Host, sdist: Path, tmp_path_factory: Any) -> Inventory:
    base = {
        "llama_cpp_tarball": str(sdist),
        "llama_cpp_tarball_subdir": "vendor/llama.cpp",
        "llama_server_profiles": [{"name": "solo", "model": MODEL, "port": 8091, "ctx_size": 256}],
        "canary_interval": 6,
        "canary_timeout": 3,
    }
    return _inventory(host, tmp_path_factory.mktemp("inv"), OPS, base)


def test_the_users_are_what_the_tests_need(host: Host) -> None:
    assert host.run(f"su - {OPS} -c 'sudo -n id -u'").strip() == "0"
    done = host.run(f"su - {NOSUDO} -c 'sudo -n true' 2>&1; echo rc=$?", check=False)
    assert "rc=1" in done


def test_llama_stack_converges_as_a_sudo_user(host: Host, llama: Inventory) -> None:
    code, report, stderr = apply(llama)
    assert code == 0, stderr
    result = host_report(report, llama)
    assert not result["skipped"], result
    assert host.active(LLAMA_UNIT)
    assert host.run("stat -c '%a %U' /etc/gpuprov/llama/solo.env").strip() == "600 root"
    assert host.run("stat -c %U /opt/gpuprov/llama.cpp/current").strip() == "root"
    assert '"ok"' in host.get(8091, "/health") or host.complete(8091)


def test_rerun_as_the_sudo_user_changes_nothing(host: Host, llama: Inventory) -> None:
    code, report, stderr = apply(llama)
    assert code == 0, stderr
    result = host_report(report, llama)
    assert result["changed"] == 0, [op for op in result["operations"] if op["status"] != "noop"]


def test_the_lock_works_through_sudo(host: Host, llama: Inventory) -> None:
    """The lock lives in root's /run: a non-root user gets it only through sudo."""
    with lock_held_by(host, "held-by-other"):
        waiting = subprocess.Popen(
            [*GPUPROV, "apply", str(llama.write()), "-y", "--json"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(6)
        assert waiting.poll() is None  # waiting for the lock, not failing to take it
    _out, err = waiting.communicate(timeout=300)
    assert waiting.returncode == 0, err
    assert "waiting for the apply lock held by held-by-other" in err
    assert host.ok(f"flock -n {lock.PATH} true")  # released


def test_a_user_without_sudo_gets_one_error_and_nothing_changes(
    host: Host, llama: Inventory, tmp_path: Path
) -> None:
    unit = host.run(f"cat /etc/systemd/system/{LLAMA_UNIT}")
    pid = host.main_pid(LLAMA_UNIT)
    nosudo = _inventory(host, tmp_path, NOSUDO, llama.data)
    profile = [{"name": "solo", "model": MODEL, "port": 8091, "ctx_size": 512}]
    done = gpuprov("apply", str(nosudo.write(llama_server_profiles=profile)), "-y")
    assert done.returncode == 1
    out = done.stdout + done.stderr
    assert "Traceback" not in out
    reason = f"{NOSUDO} cannot run commands through sudo: sudo: a password is required"
    assert out.count(reason) == 1, out
    assert "nothing to change" not in out
    assert nosudo.name in out
    assert host.run(f"cat /etc/systemd/system/{LLAMA_UNIT}") == unit
    assert host.main_pid(LLAMA_UNIT) == pid
    as_json = gpuprov("apply", str(nosudo.path), "-y", "--json")
    assert as_json.returncode == 1
    assert reason in as_json.stdout
    unprivileged = gpuprov("apply", str(nosudo.write(_sudo=False)), "-y")
    assert unprivileged.returncode == 1
    assert f"{NOSUDO} is not root: set `_sudo: True`" in unprivileged.stdout
    assert host.run(f"cat /etc/systemd/system/{LLAMA_UNIT}") == unit


def test_vllm_stack_converges_as_a_sudo_user(host: Host, llama: Inventory) -> None:
    standins.install(host.record, gpus=GPUS_580, images=IMAGES, docker_info=DOCKER_INFO)
    vllm = {
        **VLLM_BASE,
        "llama_server_profiles": [],
        "vllm_replicas": [{**REPLICA, "name": "qwen-1", "port": 8500, "gpus": [0]}],
    }
    code, report, stderr = apply(llama, **vllm)
    assert code == 0, stderr
    assert host.active(VLLM_UNIT)
    assert host.run("stat -c '%a %U' /etc/gpuprov/vllm/qwen-1.env").strip() == "600 root"
    code, report, stderr = apply(llama, **vllm)
    assert code == 0, stderr
    assert host_report(report, llama)["changed"] == 0


@pytest.fixture(autouse=True)
def secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUPROV_E2E_HF_TOKEN", "hf_sudo-e2e")
    monkeypatch.setenv("GPUPROV_E2E_VLLM_KEY", "sudo-e2e-key")
