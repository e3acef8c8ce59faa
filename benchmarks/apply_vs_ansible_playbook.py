"""Re-apply on a converged host: `gpuprov apply` against `ansible-playbook` running the same roles.

Both converge the same files and units (ansible/site.yml uses the roles' Ansible tasks, defaults
and templates); on a converged host neither changes anything, so this times checking. gpuprov's
run includes its gate (every probe on the host); the play gathers no facts. Prints each median
and the ratio gpuprov/ansible; the goal is 0.5 or less.

    .venv/bin/python benchmarks/apply_vs_ansible_playbook.py --inventory INV.py --runs 5

INV.py is a pyinfra inventory with one host that `gpuprov apply INV.py` has converged (the
end-to-end tests leave one when GPUPROV_KEEP_TESTHOSTS=1).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import sidebyside

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
GOAL = 0.5
SSH_KEYS = ("ssh_user", "ssh_key", "ssh_known_hosts_file", "ssh_strict_host_key_checking")


def ansible_inventory(inventory: str, folder: Path) -> tuple[Path, Path]:
    """An INI inventory and an extra-vars file for the one host of a pyinfra inventory."""
    sys.path.insert(0, str(ROOT))
    from provision import deploy

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inventory", required=True, help="pyinfra inventory of a converged host")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    os.environ["ANSIBLE_CONFIG"] = str(ROOT / "ansible" / "ansible.cfg")
    with tempfile.TemporaryDirectory() as tmp:
        ini, extra = ansible_inventory(args.inventory, Path(tmp))
        play = playbook(ini, extra)
        first = subprocess.run(play, capture_output=True, text=True, cwd=ROOT / "ansible")
        if first.returncode != 0:
            raise SystemExit(f"ansible-playbook failed:\n{first.stdout[-3000:]}")
        changed = recap_changed(first.stdout)
        print(f"ansible-playbook on the converged host: changed={changed}")
        if changed:
            raise SystemExit("the play changed the host: the two engines do not converge alike")
        commands = {
            "gpuprov apply": [str(BIN / "gpuprov"), "apply", args.inventory, "-y", "--json"],
            "ansible-playbook": play,
        }
        samples = sidebyside.compare(commands, args.runs, Path(tmp) / "out")
    sidebyside.report(samples, f"{args.runs} runs", GOAL)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
