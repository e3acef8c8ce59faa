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
    ssh_args = (
        f"-o UserKnownHostsFile={data['ssh_known_hosts_file']} -o StrictHostKeyChecking=accept-new"
    )
    line = (
        f"{host.name} ansible_user={data.get('ssh_user', 'root')} "
        f"ansible_ssh_private_key_file={data['ssh_key']} ansible_ssh_common_args='{ssh_args}'"
    )
    ini = folder / "hosts.ini"
    ini.write_text(f"[all]\n{line}\n")
    variables = {k: v for k, v in data.items() if k not in SSH_KEYS and not k.startswith("_")}
    extra = folder / "vars.json"
    extra.write_text(json.dumps(variables))
    return ini, extra


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
