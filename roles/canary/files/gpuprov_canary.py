#!/usr/bin/env python3
"""gpuprov canary: send a real 1-token completion to each llama.cpp server; restart a unit after
N consecutive failures. Run by gpuprov-canary.timer; logs go to the journal (stdout).

Config: one server per line, tab-separated: unit, base URL, model alias, EnvironmentFile path.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import requests


def log(message: str) -> None:
    print(message, flush=True)


def read_key(env_file: str) -> str:
    """LLAMA_API_KEY from a systemd EnvironmentFile, or ''."""
    try:
        lines = Path(env_file).read_text().splitlines()
    except OSError:
        return ""
    for line in lines:
        key, _, value = line.strip().partition("=")
        if key == "LLAMA_API_KEY":
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
            return value
    return ""


def probe(url: str, alias: str, key: str, timeout: float) -> tuple[str, str]:
    """('ok'|'loading'|'fail', detail) for one server."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        health = requests.get(f"{url}/health", headers=headers, timeout=timeout)
        if health.status_code == 503 and "loading" in health.text.lower():
            return "loading", "model still loading"
        body = {"model": alias, "prompt": "Hi", "n_predict": 1, "cache_prompt": False}
        reply = requests.post(f"{url}/completion", json=body, headers=headers, timeout=timeout)
    except (requests.RequestException, ValueError) as exc:  # ValueError: a key latin-1 can't send
        return "fail", type(exc).__name__
    if reply.status_code != 200:
        return "fail", f"HTTP {reply.status_code}"
    try:
        content = reply.json()["content"]
    except (ValueError, KeyError, TypeError):
        return "fail", "reply is not a completion"
    return "ok", f"1 token in {reply.elapsed.total_seconds():.2f}s ({content!r})"


def unit_state(systemctl: str, unit: str) -> str:
    done = subprocess.run([systemctl, "is-active", unit], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", required=True)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--timeout", type=float, default=20)
    parser.add_argument("--failures", type=int, default=2)
    parser.add_argument("--systemctl", default="systemctl")
    args = parser.parse_args(argv)
    state = Path(args.state_dir)
    state.mkdir(parents=True, exist_ok=True)
    failed = 0
    for line in Path(args.config).read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        unit, url, alias, env_file = line.split("\t")
        counter = state / f"{unit}.failures"
        active = unit_state(args.systemctl, unit)
        if active != "active":
            log(f"{unit}: skipped, unit is {active}")
            continue
        result, detail = probe(url, alias, read_key(env_file), args.timeout)
        if result != "fail":
            counter.unlink(missing_ok=True)
            log(f"{unit}: {result}: {detail}")
            continue
        failed += 1
        count = int(counter.read_text() or 0) + 1 if counter.exists() else 1
        if count < args.failures:
            counter.write_text(str(count))
            log(f"{unit}: failed ({detail}), {count} of {args.failures} before a restart")
            continue
        counter.unlink(missing_ok=True)
        log(f"{unit}: failed ({detail}) {count} times in a row: restarting {unit}")
        subprocess.run([args.systemctl, "restart", unit], check=False)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
