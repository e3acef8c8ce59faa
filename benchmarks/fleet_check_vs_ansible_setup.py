"""`gpuprov check INVENTORY` against `ansible all -m setup -f N` on the same N test hosts.

Starts N systemd test hosts (gpuprov testhost; default 16, named fleetbench1..N), writes one
pyinfra inventory and one INI inventory for them, then runs both commands alternately (one
warm-up each, then --runs timed rounds) and prints each median and the ratio gpuprov/ansible.
The goal is 0.25 or less. Both connect over SSH to every host in parallel; gpuprov runs its
probes and judges each host, ansible gathers its facts.

    .venv/bin/python benchmarks/fleet_check_vs_ansible_setup.py --hosts 16 --runs 5 [--keep]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import sidebyside

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from provision.testhost import hosts  # noqa: E402

BIN = Path(sys.executable).parent
GOAL = 0.25


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=16)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="leave the test hosts running")
    args = parser.parse_args()
    names = [f"fleetbench{i}" for i in range(1, args.hosts + 1)]
    started = [hosts.up(name) for name in names]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            inventory, ini = _inventories(started, folder)
            check = [str(BIN / "gpuprov"), "check", str(inventory), "--json", "--fail-on", "never"]
            first = subprocess.run(check, capture_output=True, text=True, check=False)
            answered = [h for h in json.loads(first.stdout)["hosts"] if h["error"] is None]
            print(f"gpuprov check: {len(answered)} of {len(started)} hosts answered")
            setup = [str(BIN / "ansible"), "all", "-i", str(ini), "-m", "setup"]
            setup += ["-f", str(len(started))]
            if len(answered) != len(started):
                raise SystemExit(first.stderr[-2000:])
            commands = {"gpuprov check INVENTORY": check, "ansible all -m setup": setup}
            samples = sidebyside.compare(commands, args.runs, folder / "out")
        sidebyside.report(samples, f"{args.runs} runs, {len(started)} hosts", GOAL)
    finally:
        if not args.keep:
            for name in names:
                hosts.down(name)
    return 0


def _inventories(started: list[hosts.TestHost], folder: Path) -> tuple[Path, Path]:
    """A pyinfra inventory and an INI inventory naming the same hosts with the same key."""
    rows = []
    lines = ["[all]"]
    for host in started:
        name, data = hosts.pyinfra_host(host)
        rows.append((name, data))
        ssh_args = (
            f"-o UserKnownHostsFile={data['ssh_known_hosts_file']} "
            "-o StrictHostKeyChecking=accept-new"
        )
        lines.append(
            f"{name} ansible_user=root ansible_ssh_private_key_file={data['ssh_key']} "
            f"ansible_ssh_common_args='{ssh_args}'"
        )
    inventory = folder / "fleet.py"
    inventory.write_text(f"hosts = {rows!r}\n")
    ini = folder / "hosts.ini"
    ini.write_text("\n".join(lines) + "\n")
    return inventory, ini


if __name__ == "__main__":
    raise SystemExit(main())
