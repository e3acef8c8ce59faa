"""`gpuprov check` against `ansible localhost -m setup -c local`, side by side on this machine.

Runs both commands alternately (one warm-up each, then --runs timed rounds), prints each median
and the ratio gpuprov/ansible. The goal is a ratio of 0.15 or less.

    .venv/bin/python benchmarks/check_vs_ansible_setup.py --runs 7
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent
GOAL = 0.15


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


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
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for argv in commands.values():
        timed(argv)  # warm-up: page cache, .pyc files
    for _ in range(args.runs):
        for name, argv in commands.items():
            samples[name].append(timed(argv))
    medians = {name: statistics.median(values) for name, values in samples.items()}
    for name, median in medians.items():
        spread = f"{min(samples[name]):.3f}-{max(samples[name]):.3f}"
        print(f"{name:18} median {median:.3f} s  (range {spread} s, {args.runs} runs)")
    ratio = medians["gpuprov check"] / medians["ansible -m setup"]
    verdict = "meets" if ratio <= GOAL else "misses"
    print(f"ratio gpuprov/ansible = {ratio:.3f} ({verdict} the goal of {GOAL})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
