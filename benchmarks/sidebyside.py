"""Time commands side by side: alternate rounds after a warm-up, medians, and their ratio."""

from __future__ import annotations

import statistics
import subprocess
import time
from pathlib import Path


def timed(argv: list[str], sink: Path) -> float:
    """Wall time of `argv` writing to a real file (GNU grep stops at the first match when its
    output is /dev/null, which would flatter it)."""
    with sink.open("wb") as out:
        start = time.perf_counter()
        subprocess.run(argv, stdout=out, stderr=subprocess.DEVNULL, check=False)
        return time.perf_counter() - start


def compare(commands: dict[str, list[str]], runs: int, sink: Path) -> dict[str, list[float]]:
    """One warm-up each, then `runs` rounds in which every command runs once, in turn."""
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for argv in commands.values():
        timed(argv, sink)
    for _ in range(runs):
        for name, argv in commands.items():
            samples[name].append(timed(argv, sink))
    return samples


def report(samples: dict[str, list[float]], note: str, goal: float) -> float:
    """Print each median and the ratio first/second; returns the ratio."""
    medians = {name: statistics.median(values) for name, values in samples.items()}
    for name, values in samples.items():
        spread = f"{min(values):.3f}-{max(values):.3f}"
        print(f"{name:18} median {medians[name]:.3f} s  (range {spread} s, {note})")
    first, second = medians.values()
    ratio = first / second
    names = "/".join(name.split()[0] for name in samples)
    verdict = "meets" if ratio <= goal else "misses"
    print(f"ratio {names} = {ratio:.3f} ({verdict} the goal of {goal})")
    return ratio
