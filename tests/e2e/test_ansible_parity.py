"""Parity of the two engines: one test host converged by `gpuprov apply`, its twin by
`ansible-playbook ansible/site.yml` from the same inventory data, then compared.

Real: two systemd test hosts, pyinfra, ansible-playbook with the repository's roles and actions
(the gate and the apply lock included), llama.cpp built CPU-only from the vendored source,
resident, on-demand and swap-group servers serving the tiny model, nginx in front of the resident
server, the canary. A second pair runs vLLM replicas behind nginx against the stand-ins of
test_apply_vllm.py (`docker` and `nvidia-smi`: no Docker engine and no GPU here), so their units,
env files and balancer are compared while no container runs.

Compared: every file the roles write (units, env files and their modes and owners, nginx's
config, the canary's script and targets, the readiness wait), which units are active, and what
the servers answer. Before its first run the Ansible host is planned with `--check --diff`, which
must succeed and leave the host untouched; after it, a second run changes nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from provision.testhost import hosts
from tests.e2e.hosts import (
    ROOT,
    TINY_MODEL,
    Host,
    Inventory,
    apply,
    llama_host,
    vendored_source,
    vllm_host,
)
from tests.e2e.test_apply_vllm import two_replicas
from tests.support import ansible_play, standins

pytestmark = pytest.mark.e2e

LLAMA_KEY = "e2e-llama-key-never-in-argv"
HF_TOKEN = "hf_e2e-parity-token"
VLLM_KEY = "e2e-parity-vllm-key"
# What the roles write; the build trees are compared by name (`current` and the builds' folders).
WRITTEN = (
    "/etc/systemd/system/gpuprov-*",
    "/etc/gpuprov",
    "/etc/nginx/conf.d/gpuprov-lb.conf",
    "/usr/local/lib/gpuprov",
)
# Python's bytecode cache is left out: the canary's runs write it, whichever engine installed it.
LISTING = (
    'for p in {paths}; do [ -e "$p" ] && find "$p" -name __pycache__ -prune -o'
    " \\( -type f -o -type l \\) -printf '%p\\t%m\\t%u:%g\\t%l\\n'; done | sort"
)


@pytest.fixture(autouse=True)
def secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUPROV_E2E_LLAMA_KEY", LLAMA_KEY)
    monkeypatch.setenv("GPUPROV_E2E_HF_TOKEN", HF_TOKEN)
    monkeypatch.setenv("GPUPROV_E2E_VLLM_KEY", VLLM_KEY)


def llama_data(sdist: Path) -> dict[str, Any]:
    model = {"model": TINY_MODEL, "ctx_size": 256}
    return {
        **vendored_source(sdist),
        "llama_server_profiles": [
            {**model, "name": "main", "port": 8091, "api_key_env": "GPUPROV_E2E_LLAMA_KEY"},
            {**model, "name": "lazy", "port": 8092, "residency": "on_demand", "idle_seconds": 60},
            {**model, "name": "swap-a", "port": 8093, "swap_group": "pair"},
            {**model, "name": "swap-b", "port": 8094, "swap_group": "pair"},
        ],
        "nginx_lb_enabled": True,
        "nginx_lb_listen": 8400,
        "nginx_lb_servers": ["127.0.0.1:8091"],
        "canary_interval": 5,
        "canary_timeout": 5,
    }


class Ansible:
    """ansible-playbook site.yml on one test host, from a pyinfra inventory's data."""

    def __init__(self, inventory: Inventory, folder: Path) -> None:
        self.ini, self.extra = ansible_play.ansible_inventory(str(inventory.write()), folder)

    def run(self, *args: str) -> tuple[int, str]:
        env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible" / "ansible.cfg")}
        env["ANSIBLE_NOCOLOR"] = "1"
        done = subprocess.run(
            [*ansible_play.playbook(self.ini, self.extra), *args],
            capture_output=True,
            text=True,
            cwd=ROOT / "ansible",
            env=env,
            timeout=1500,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        return done.returncode, done.stdout + done.stderr


def written(host: Host) -> dict[str, str]:
    """path -> 'mode owner:group sha256' (or the target of a link) of every file the roles wrote."""
    listing = host.run(LISTING.format(paths=" ".join(WRITTEN)))
    found: dict[str, str] = {}
    for line in listing.splitlines():
        path, mode, owner, target = line.split("\t")
        found[path] = f"{mode} {owner} -> {target}" if target else f"{mode} {owner}"
    files = [p for p, v in found.items() if "->" not in v]
    if files:
        sums = host.run("sha256sum " + " ".join(files))
        for line in sums.splitlines():
            digest, path = line.split(maxsplit=1)
            found[path] = f"{found[path]} {digest}"
    return found


def contents(host: Host, path: str) -> str:
    return host.run(f"cat {path}")


def builds(host: Host) -> tuple[str, list[str]]:
    prefix = "/opt/gpuprov/llama.cpp"
    current = host.run(f"readlink {prefix}/current").strip()
    return os.path.basename(current), sorted(host.run(f"ls {prefix}/builds").split())


def active_units(host: Host) -> dict[str, str]:
    """unit -> its ActiveState, for every unit whose state does not depend on the moment: an
    on-demand server and its proxy run only between a request and the idle stop (apply's check
    wakes them on one host, nothing on the other), and the canary's service only while its timer
    fires, so of those only the socket and the timer count."""
    out = host.run(
        "systemctl list-units --all --plain --no-legend 'gpuprov-*' | awk '{print $1, $3}'"
    )
    states = dict(line.split() for line in out.splitlines())
    started = {u.rsplit(".", 1)[0] for u in states if u.endswith((".socket", ".timer"))}
    return {
        u: a
        for u, a in states.items()
        if u.removesuffix(".service").removesuffix("-proxy") not in started
    }


def same_files(left: Host, right: Host) -> None:
    """Every written file alike; on a difference, the unified diff of the first one."""
    mine, theirs = written(left), written(right)
    assert sorted(mine) == sorted(theirs)
    for path in mine:
        if mine[path] != theirs[path]:
            a, b = contents(left, path), contents(right, path)
            assert a == b, f"{path}: {mine[path]} vs {theirs[path]}"
            assert mine[path] == theirs[path], path


def nothing_written(host: Host) -> None:
    assert written(host) == {}
    assert host.run("ls /etc/systemd/system | grep -c gpuprov || true").strip() == "0"
    if host.ok("test -x /usr/local/bin/docker"):  # the stand-in: no image pulled, nothing run
        calls = standins.calls(host.record)
        assert not [c for c in calls if c["argv"][:1] in (["pull"], ["run"])]


def converge_both(
    by_gpuprov: Inventory, by_ansible: Inventory, twin: Host, folder: Path, unit: str
) -> None:
    """`gpuprov apply` of one inventory; on the twin, ansible-playbook --check --diff (it shows
    the new `unit` and writes nothing), two real runs (the second changes nothing) and --check
    again (nothing left to change)."""
    code, _, stderr = apply(by_gpuprov)
    assert code == 0, stderr[-4000:]
    ansible = Ansible(by_ansible, folder)
    code, out = ansible.run("--check", "--diff")
    assert code == 0, out[-6000:]
    assert f"+SyslogIdentifier={unit.removesuffix('.service')}" in out, out[-6000:]  # its diff
    nothing_written(twin)
    for args, changes in (((), None), ((), 0), (("--check", "--diff"), 0)):
        code, out = ansible.run(*args)
        assert code == 0, out[-6000:]
        assert changes is None or ansible_play.recap_changed(out) == changes, out[-6000:]


# --- llama.cpp -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def llama_pair(
    testhost_factory: Callable[[str], hosts.TestHost], sdist: Path, tmp_path_factory: Any
) -> tuple[Host, Host, Inventory, Inventory]:
    folder = tmp_path_factory.mktemp("parity-llama")
    left = llama_host(testhost_factory, "e2e-par-gl", folder)
    right = llama_host(testhost_factory, "e2e-par-al", folder)
    data = llama_data(sdist)
    return (
        left,
        right,
        Inventory(folder / "gpuprov.py", left.record, data),
        Inventory(folder / "ansible.py", right.record, data),
    )


def test_llama_stack_converges_alike_with_both_engines(
    llama_pair: tuple[Host, Host, Inventory, Inventory], tmp_path: Path
) -> None:
    left, right, by_gpuprov, by_ansible = llama_pair
    converge_both(by_gpuprov, by_ansible, right, tmp_path, "gpuprov-llama-main.service")
    same_files(left, right)
    assert builds(left) == builds(right)
    assert active_units(left) == active_units(right)
    for host in (left, right):
        answer = host.run(
            "curl -sf -m 60 -H 'Authorization: Bearer "
            f'{LLAMA_KEY}\' -d \'{{"prompt": "Hi", "n_predict": 2}}\' '
            "http://127.0.0.1:8400/completion"
        )
        assert json.loads(answer)["content"] is not None
        for port in (8092, 8093, 8094):  # woken through their sockets
            body = host.run(
                f'curl -sf -m 60 -d \'{{"prompt": "Hi", "n_predict": 2}}\' '
                f"http://127.0.0.1:{port}/completion"
            )
            assert "content" in json.loads(body)


# --- vLLM ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def vllm_pair(
    testhost_factory: Callable[[str], hosts.TestHost], tmp_path_factory: Any
) -> tuple[Host, Host, Inventory, Inventory]:
    folder = tmp_path_factory.mktemp("parity-vllm")
    pair = [vllm_host(testhost_factory, name) for name in ("e2e-par-gv", "e2e-par-av")]
    data = two_replicas()
    return (
        pair[0],
        pair[1],
        Inventory(folder / "gpuprov.py", pair[0].record, data),
        Inventory(folder / "ansible.py", pair[1].record, data),
    )


def test_vllm_replicas_converge_alike_with_both_engines(
    vllm_pair: tuple[Host, Host, Inventory, Inventory], tmp_path: Path
) -> None:
    left, right, by_gpuprov, by_ansible = vllm_pair
    converge_both(by_gpuprov, by_ansible, right, tmp_path, "gpuprov-vllm-qwen-1.service")
    same_files(left, right)
    assert active_units(left) == active_units(right)
    runs = [
        [c["argv"] for c in standins.calls(host.record) if c["argv"][:1] == ["run"]]
        for host in (left, right)
    ]
    assert runs[0] and sorted(map(str, runs[0])) == sorted(map(str, runs[1]))
    for host in (left, right):
        answer = host.run(
            f"curl -sf -m 20 -H 'Authorization: Bearer {VLLM_KEY}' http://127.0.0.1:8400/v1/models"
        )
        assert json.loads(answer)["data"]
