"""Run ansible/site.yml on the host of a one-host pyinfra inventory, its data as extra vars."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from provision import deploy
from provision.testhost.hosts import TestHost

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "ansible" / "ansible.cfg"  # its roles_path and filter_plugins
BIN = Path(sys.executable).parent
SSH_KEYS = ("ssh_user", "ssh_key", "ssh_known_hosts_file", "ssh_strict_host_key_checking")


def ansible_inventory(inventory: str, folder: Path) -> tuple[Path, Path]:
    """An INI inventory and an extra-vars file for the one host of a pyinfra inventory."""
    _, _, hosts = deploy.load_inventory(inventory)
    if len(hosts) != 1:
        raise SystemExit(f"{inventory}: expected one host, found {len(hosts)}")
    host = hosts[0]
    data = host.data.dict()
    line = host_line(
        host.name, data.get("ssh_user", "root"), data["ssh_key"], data["ssh_known_hosts_file"]
    )
    ini = folder / "hosts.ini"
    ini.write_text(f"[all]\n{line}\n")
    variables = {k: v for k, v in data.items() if k not in SSH_KEYS and not k.startswith("_")}
    extra = folder / "vars.json"
    extra.write_text(json.dumps(variables))
    return ini, extra


def host_line(name: str, user: str, key: object, known_hosts: object) -> str:
    """An INI inventory line: `user` over SSH with `key`, host keys kept in `known_hosts`."""
    ssh_args = f"-o UserKnownHostsFile={known_hosts} -o StrictHostKeyChecking=accept-new"
    return (
        f"{name} ansible_user={user} ansible_ssh_private_key_file={key}"
        f" ansible_ssh_common_args='{ssh_args}'"
    )


def run_roles(
    host: TestHost, folder: Path, roles: list[str], variables: dict[str, Any], *args: str
) -> subprocess.CompletedProcess[str]:
    """ansible-playbook running `roles` (ansible/ansible.cfg's) on a test host as root, with
    `variables` as extra vars and `args` (e.g. --check --diff) added."""
    line = host_line(host.address, "root", host.ssh_key, host.known_hosts)
    (folder / "hosts.ini").write_text(f"[all]\n{line}\n")
    (folder / "vars.json").write_text(json.dumps(variables))
    play = [{"hosts": "all", "gather_facts": False, "roles": roles}]
    (folder / "play.yml").write_text(json.dumps(play))
    env = {**os.environ, "ANSIBLE_CONFIG": str(CONFIG), "ANSIBLE_NOCOLOR": "1"}
    return subprocess.run(
        [
            str(BIN / "ansible-playbook"),
            *("-i", str(folder / "hosts.ini"), "-e", f"@{folder / 'vars.json'}"),
            *args,
            str(folder / "play.yml"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT / "ansible",
        timeout=600,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def playbook(ini: Path, extra: Path) -> list[str]:
    return [
        str(BIN / "ansible-playbook"),
        "-i",
        str(ini),
        "-e",
        f"@{extra}",
        str(ROOT / "ansible" / "site.yml"),
    ]


def recap_changed(output: str) -> int:
    """The `changed=` count of the play recap."""
    found = re.findall(r"changed=(\d+)", output)
    if not found:
        raise SystemExit(f"ansible-playbook printed no recap:\n{output[-2000:]}")
    return sum(int(n) for n in found)


def run_local(
    folder: Path, tasks: list[dict[str, Any]], variables: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    """`tasks` under ansible-playbook on this machine (connection local), `variables` as extra
    vars, with ansible/ansible.cfg (so gpuprov's filters); its files go under `folder`."""
    play = [{"hosts": "localhost", "connection": "local", "gather_facts": False, "tasks": tasks}]
    (folder / "play.yml").write_text(json.dumps(play))
    (folder / "vars.json").write_text(json.dumps(variables))
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(CONFIG),
        "PYTHONPATH": str(ROOT),
        "ANSIBLE_HOME": str(folder / "ansible-home"),
        "ANSIBLE_LOCAL_TEMP": str(folder / "ansible-tmp"),
        "ANSIBLE_REMOTE_TEMP": str(folder / "ansible-tmp"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_LOCALHOST_WARNING": "0",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
    }
    return subprocess.run(
        [
            str(BIN / "ansible-playbook"),
            *("-i", "localhost,", "play.yml", "-e", "@vars.json"),
            *("-e", f"ansible_python_interpreter={sys.executable}"),
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def render(folder: Path, sources: dict[str, str], variables: dict[str, Any]) -> dict[str, bytes]:
    """What Ansible's template module writes for each roles/<source>, by name."""
    out = folder / "out"
    out.mkdir()
    tasks = [
        {"ansible.builtin.template": {"src": str(ROOT / "roles" / src), "dest": str(out / name)}}
        for name, src in sources.items()
    ]
    done = run_local(folder, tasks, variables)
    assert done.returncode == 0, done.stdout + done.stderr
    return {name: (out / name).read_bytes() for name in sources}
