"""`gpuprov check` against `ansible localhost -m setup -c local`, side by side on this machine.

Runs both commands alternately (one warm-up each, then --runs timed rounds), prints each median
and the ratio gpuprov/ansible. The goal is a ratio of 0.15 or less.

    .venv/bin/python benchmarks/check_vs_ansible_setup.py --runs 7
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import sidebyside

BIN = Path(sys.executable).parent
GOAL = 0.15


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    env = dict(
        os.environ, ANSIBLE_LOCALHOST_WARNING="False", ANSIBLE_INVENTORY_UNPARSED_WARNING="False"
    )
    os.environ.update(env)
    commands = {
        "gpuprov check": [str(BIN / "gpuprov"), "check", "--json"],
        "ansible -m setup": [str(BIN / "ansible"), "localhost", "-m", "setup", "-c", "local"],
    }
    with tempfile.TemporaryDirectory() as tmp:
        samples = sidebyside.compare(commands, args.runs, Path(tmp) / "out")
    sidebyside.report(samples, f"{args.runs} runs", GOAL)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
