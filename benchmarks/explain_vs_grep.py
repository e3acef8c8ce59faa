"""`gpuprov explain` against `grep -E -f` with the same patterns, on a generated log.

Writes a log of --mb megabytes (vLLM and llama.cpp noise, near-misses such as port 804, and a few
real failure lines), turns every signature pattern into a POSIX ERE for grep, then times both
alternately (--runs rounds after a warm-up) and prints the medians and the ratio explain/grep.
The goal is a ratio of 2 or less.

    .venv/bin/python benchmarks/explain_vs_grep.py --mb 256 --runs 3
"""

from __future__ import annotations

import argparse
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import sidebyside

from checks.logs import logscan

GOAL = 2.0
NOISE = [
    "(VllmWorker rank=0 pid=123) INFO 06-05 06:18:13 [gpu_model_runner.py:1234] Loading weights "
    "took 3.21 seconds",
    'INFO:     127.0.0.1:53412 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "INFO 11-01 10:00:00 [loggers.py:118] Engine 000: Avg prompt throughput: 804.1 tokens/s, "
    "Avg generation throughput: 212.0 tokens/s, Running: 4 reqs, GPU KV cache usage: 12.3%",
    "srv  update_slots: id  0 | task 4123 | prompt processing progress, n_past = 2048, "
    "n_tokens = 512, progress = 0.500000",
    "2026-11-01T10:00:00.123Z llama-server[804]: slot release: id 0 | task 804 | stop processing",
    "load_tensors: offloaded 49/49 layers to GPU, listening on port 8804",
    "\x1b[32mINFO\x1b[0m 11-01 10:00:01 [api_server.py:1090] Starting vLLM API server on "
    "http://0.0.0.0:8000",
    "slot print_timing: id  0 | task 804 | prompt eval time = 80.40 ms / 804 tokens",
]
FAILURES = [
    "RuntimeError: Unexpected error from cudaGetDeviceCount(). Error 804: forward compatibility "
    "was attempted on non supported HW",
    "(EngineCore pid=249) ERROR 08-26 01:05:01 [core.py:1357] AssertionError: Workspace is locked "
    "but allocation from 'modular_kernel.py:1167:_allocate_buffers' requires 146.41 MB, current "
    "size is 3.75 MB. Workspace growth is not allowed after locking.",
    "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8, please update "
    "your driver to a newer version, or use an earlier cuda container: unknown",
]


def write_log(path: Path, megabytes: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    target = megabytes << 20
    with path.open("w") as out:
        size = 0
        block = []
        while size < target:
            line = rng.choice(NOISE) + "\n"
            block.append(line)
            size += len(line)
            if len(block) == 4096:
                if rng.random() < 0.01:
                    block.append(rng.choice(FAILURES) + "\n")
                out.write("".join(block))
                block = []
        out.write("".join(block))


_CONDITION = re.compile(r"\(\?\(\w+\)")


def _optional_conditionals(pattern: str) -> str:
    """`(?(name)X)` (X only where group name matched) as an optional group `(X)?`."""
    out, depth, closes = [], 0, set()
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        head = _CONDITION.match(pattern, i)
        if head:
            depth += 1
            closes.add(depth)
            out.append("(")
            i += len(head.group())
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            out.append(")?" if depth in closes else ")")
            closes.discard(depth)
            depth -= 1
            i += 1
            continue
        out.append(char)
        i += 1
    return "".join(out)


def to_ere(pattern: str) -> str:
    """A Python regex of the signatures' dialect as a POSIX ERE with GNU extensions."""
    ere = re.sub(r"\(\?P<\w+>", "(", _optional_conditionals(pattern))
    ere = ere.replace("(?:", "(").replace("*?", "*").replace("+?", "+")
    ere = re.sub(r"\(\?i:([^)]*)\)", r"\1", ere)
    classes = {"d": "[0-9]", "w": "[[:alnum:]_]", "s": "[[:space:]]"}
    # One escape at a time, so the 'w' of an escaped backslash's '\\windows' stays a letter.
    return re.sub(r"\\(.)", lambda m: classes.get(m.group(1), m.group()), ere)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=256)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log, patterns = Path(tmp) / "big.log", Path(tmp) / "patterns.txt"
        write_log(log, args.mb)
        patterns.write_text("".join(to_ere(s.pattern.pattern) + "\n" for s in logscan.signatures()))
        check = subprocess.run(["grep", "-E", "-f", str(patterns), "/dev/null"], check=False)
        if check.returncode == 2:
            print("grep rejected the converted patterns", file=sys.stderr)
            return 2
        gpuprov = str(Path(sys.executable).parent / "gpuprov")
        commands = {
            "gpuprov explain": [gpuprov, "explain", "--json", str(log)],
            "grep -E -f": ["grep", "-E", "-n", "-f", str(patterns), str(log)],
        }
        samples = sidebyside.compare(commands, args.runs, Path(tmp) / "out")
    sidebyside.report(samples, f"{args.runs} runs, {args.mb} MB log", GOAL)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
