#!/usr/bin/env python3
"""gpuprov canary: send a real 1-token completion to each server; restart a unit after N
consecutive failures. Run by gpuprov-canary.timer; logs go to the journal (stdout).

Config: one server per line, tab-separated: unit, base URL, model name, EnvironmentFile path,
kind: "llama" (llama.cpp's /completion), "openai" (vLLM's /v1/completions) or "balancer" (the same
through the load balancer: logged, never restarted, since a restart cannot mend its backends),
and start-up seconds. A line without a kind is "llama"; without start-up seconds, 0.

A server is loading, not failing, while it says so (llama.cpp: 503 "Loading model" on /health)
or does not answer yet (vLLM refuses connections until its model is loaded), for up to its
start-up seconds after the unit became active (ActiveEnterTimestampMonotonic); past them the
same answers are failures. Each request has a hard deadline (--timeout), however slowly the
server sends.

Only an active unit is probed. A unit systemd is restarting (activating after an automatic
restart) or has given up on (failed) is FAILING: its state, restart count, last exit and last
journal lines are logged, and the canary leaves it to systemd. One a person stopped (inactive,
result success, no restarts) is skipped. Any state not read counts as a failure: exit 1.

Before systemd 254 (no RestartSteps), units bound their restarts with a start limit: past it,
systemd gives up and the unit is failed (its Result stays the last exit's, e.g. exit-code). The
units restart always, so a failed one is one systemd gave up on: it is started again once it has
been down --cool-down seconds (InactiveEnterTimestampMonotonic), so a crash loop restarts in
bursts, not every 2 seconds, and a server that recovers comes back.

With --metrics-dir, each run ends by writing gpuprov_canary.prom there for node_exporter's
textfile collector (Prometheus text format, written to a temporary file and renamed): per
server, up, loading, idle, the last probe's seconds, failed runs in a row, systemd's automatic
restarts and the canary's own restarts (a counter kept in --state-dir); per GPU, what
nvidia-smi reports (memory, utilisation, temperature, power; values it has not are left out),
and the GPU memory of each process with the unit its cgroup names.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import requests

# What `systemctl show` is asked for; ExecMainCode says how ExecMainStatus reads (1: exit status,
# 2: killed by that signal, 3: dumped core on it), as the kernel's si_code does.
PROPERTIES = (
    "NRestarts",
    "ActiveState",
    "SubState",
    "ExecMainStatus",
    "ExecMainCode",
    "Result",
    "ActiveEnterTimestampMonotonic",
    "InactiveEnterTimestampMonotonic",
)
SHOW_TIMEOUT = 15  # seconds, for systemctl show and journalctl
RESTART_TIMEOUT = 120  # seconds: a unit's stop (vLLM: TimeoutStopSec=60), then its start
JOURNAL_LINES = 10
GRACE = 1.0  # seconds past a probe's timeout before its request is given up on


def log(message: str) -> None:
    print(message, flush=True)


def read_key(env_file: str, name: str = "LLAMA_API_KEY") -> str:
    """`name` (an API key) from a systemd EnvironmentFile, or ''."""
    try:
        lines = Path(env_file).read_text().splitlines()
    except OSError:
        return ""
    for line in lines:
        key, _, value = line.strip().partition("=")
        if key == name:
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
            return value
    return ""


class Deadline(requests.Timeout):
    """No whole reply within the deadline (requests' own timeout bounds each read only)."""


def fetch(method: str, url: str, timeout: float, **kwargs: Any) -> requests.Response:
    """A request and its whole body within `timeout` (+GRACE) seconds, or Deadline; in a daemon
    thread, so a server that trickles bytes holds only the thread, until the canary exits."""
    done: list[requests.Response | BaseException] = []

    def go() -> None:
        try:
            reply = requests.request(method, url, timeout=timeout, **kwargs)
            reply.content  # noqa: B018 (the body, read here)
            done.append(reply)
        except BaseException as exc:  # handed to the caller
            done.append(exc)

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    thread.join(timeout + GRACE)
    if not done:
        raise Deadline(f"no whole reply within {timeout + GRACE:g}s")
    if isinstance(done[0], BaseException):
        raise done[0]
    return done[0]


def probe(url: str, alias: str, key: str, timeout: float) -> tuple[str, str]:
    """('ok'|'loading'|'fail', detail) for one server."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        health = fetch("GET", f"{url}/health", timeout, headers=headers)
        if health.status_code == 503 and "loading" in health.text.lower():
            return "loading", "model still loading"
        body = {"model": alias, "prompt": "Hi", "n_predict": 1, "cache_prompt": False}
        reply = fetch("POST", f"{url}/completion", timeout, json=body, headers=headers)
    except (requests.RequestException, ValueError) as exc:  # ValueError: a key latin-1 can't send
        return "fail", type(exc).__name__
    return _completed(reply, lambda body: body["content"])


def probe_openai(url: str, model: str, key: str, timeout: float) -> tuple[str, str]:
    """The same through the OpenAI-compatible API (vLLM, or a balancer in front of it)."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        health = fetch("GET", f"{url}/health", timeout, headers=headers)
        if health.status_code != 200:
            return "fail", f"/health: HTTP {health.status_code}"
        body = {"model": model, "prompt": "Hi", "max_tokens": 1}
        reply = fetch("POST", f"{url}/v1/completions", timeout, json=body, headers=headers)
    except (requests.RequestException, ValueError) as exc:
        return "fail", type(exc).__name__
    return _completed(reply, lambda body: body["choices"][0]["text"])


def _completed(reply: requests.Response, content: Callable[[Any], Any]) -> tuple[str, str]:
    if reply.status_code != 200:
        return "fail", f"HTTP {reply.status_code}"
    try:
        text = content(reply.json())
    except (ValueError, KeyError, TypeError, IndexError):
        return "fail", "reply is not a completion"
    return "ok", f"1 token in {reply.elapsed.total_seconds():.2f}s ({text!r})"


def run(argv: Sequence[str], timeout: float) -> tuple[str, str]:
    """(stdout, problem) of a command: problem is "" when it exited 0, else one line saying why
    (its stderr, its exit status, or that it did not start or answer within `timeout` seconds)."""
    name = Path(argv[0]).name
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, errors="replace", timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return "", f"{name} did not answer within {timeout:g}s"
    except OSError as exc:
        return "", f"{name}: {exc.strerror or exc}"
    if done.returncode == 0:
        return done.stdout, ""
    said = " ".join(done.stderr.split())
    return done.stdout, f"{name} exited {done.returncode}" + (f": {said}" if said else "")


class UnitState(NamedTuple):
    """A unit as `systemctl show -p PROPERTIES` describes it; None and "" are unknown."""

    active: str = ""  # ActiveState: active, activating, inactive, failed, ...
    sub: str = ""  # SubState: running, auto-restart, dead, ...
    restarts: int | None = None  # NRestarts: automatic restarts since the last manual start
    status: int | None = None  # ExecMainStatus
    code: int | None = None  # ExecMainCode
    result: str = ""  # Result: success, exit-code, signal, core-dump, timeout, ...
    since: int | None = None  # ActiveEnterTimestampMonotonic: µs on CLOCK_MONOTONIC, 0 never
    down_since: int | None = None  # InactiveEnterTimestampMonotonic, the same way

    def active_for(self, now: float) -> float | None:
        """Seconds since the unit last became active (`now`: time.monotonic()), if known."""
        return now - self.since / 1e6 if self.since else None

    def down_for(self, now: float) -> float | None:
        """Seconds since the unit last stopped or failed, if known."""
        return now - self.down_since / 1e6 if self.down_since else None

    @property
    def verdict(self) -> str:
        """'active' (probe it), 'failing', 'stopped' (by a person), 'busy' (starting, stopping,
        reloading) or 'unknown'."""
        restarted = bool(self.restarts)
        if self.active == "active":
            return "active"
        if self.active == "failed":
            return "failing"
        if self.active == "activating":  # after a restart systemd made, or a first start
            return "failing" if restarted or self.sub.startswith("auto-restart") else "busy"
        if self.active == "inactive":
            return "failing" if restarted or self.result not in ("success", "") else "stopped"
        return "busy" if self.active else "unknown"

    @property
    def shown(self) -> str:
        """'activating (auto-restart)', as `systemctl status` writes it."""
        return f"{self.active} ({self.sub})" if self.sub else self.active

    def describe(self) -> str:
        """'activating (auto-restart), 39 automatic restarts, main process exited with status 1,
        result exit-code'."""
        parts = [self.shown]
        if self.restarts is not None:
            parts.append(f"{self.restarts} automatic restart{'' if self.restarts == 1 else 's'}")
        if last := self.last_exit():
            parts.append(f"main process {last}")
        if self.result:
            parts.append(f"result {self.result}")
        return ", ".join(parts)

    def last_exit(self) -> str:
        """How the main process last ended; '' when none has, or it is not known."""
        if self.status is None or (not self.code and not self.status):
            return ""
        dumped = self.code == 3 or (self.code is None and self.result == "core-dump")
        killed = self.code == 2 or (self.code is None and self.result == "signal")
        if not (dumped or killed):
            return f"exited with status {self.status}"
        try:
            name = f" ({signal.Signals(self.status).name})"
        except ValueError:
            name = ""
        return f"{'dumped core on' if dumped else 'killed by'} signal {self.status}{name}"


def parse_show(text: str) -> UnitState:
    """`systemctl show -p ...` output (KEY=VALUE lines, in systemd's order) as a UnitState."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key in PROPERTIES:
            values[key] = value.strip()

    def number(key: str, digits: int = 9) -> int | None:
        value = values.get(key, "")
        return int(value) if value.isdigit() and value.isascii() and len(value) <= digits else None

    return UnitState(
        active=values.get("ActiveState", ""),
        sub=values.get("SubState", ""),
        restarts=number("NRestarts"),
        status=number("ExecMainStatus"),
        code=number("ExecMainCode"),
        result=values.get("Result", ""),
        since=number("ActiveEnterTimestampMonotonic", 19),
        down_since=number("InactiveEnterTimestampMonotonic", 19),
    )


def unit_state(systemctl: str, unit: str) -> tuple[UnitState, str]:
    """The unit's state, and why it is unknown when it is."""
    out, problem = run([systemctl, "show", "-p", ",".join(PROPERTIES), unit], SHOW_TIMEOUT)
    state = parse_show(out) if not problem else UnitState()
    return state, problem or ("" if state.active else "systemctl show gave no ActiveState")


def journal(journalctl: str, unit: str, lines: int, secret: str) -> list[str]:
    """The unit's last journal lines with `secret` masked, or one line saying why there are none."""
    argv = [journalctl, "-u", unit, "-n", str(lines), "--no-pager", "-o", "cat"]
    out, problem = run(argv, SHOW_TIMEOUT)
    found = [line.rstrip() for line in out.splitlines() if line.strip()] if not problem else []
    if secret:
        found = [line.replace(secret, "<secret>") for line in found]
    return found or [f"(no lines: {problem})" if problem else "(no lines)"]


def read_count(counter: Path, digits: int = 5) -> int:
    """A count kept in a file (failures in a row so far): 0 when none is recorded, or the file
    is not a count of at most `digits` digits."""
    try:
        text = counter.read_text(errors="replace").strip()
    except OSError:
        return 0
    return int(text) if text.isdigit() and text.isascii() and len(text) <= digits else 0


def targets(text: str) -> list[tuple[str, str, str, str, str, float, str]]:
    """The config's lines: (unit, url, model, env_file, kind, start-up seconds, residency);
    others skipped."""
    found = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) < 4:
            log(f"config line not understood, skipped: {line[:80]!r}")
            continue
        unit, url, alias, env_file, *rest = fields
        kind = rest[0] if rest and rest[0] else "llama"
        try:
            startup = max(0.0, float(rest[1])) if len(rest) > 1 else 0.0
        except ValueError:
            startup = 0.0
        residency = rest[2].strip() if len(rest) > 2 and rest[2].strip() else "resident"
        found.append((unit, url, alias, env_file, kind, startup, residency))
    return found


# A server not ready yet refuses the connection or says so (vLLM listens only once loaded);
# one that accepts and then never answers in time is hung, start-up or not.
NOT_READY = ("ConnectionError", "/health: HTTP 503")


def loading(result: str, detail: str, active_for: float | None, startup: float) -> str:
    """Why a failed or loading probe is a server still starting ('' when it is a failure)."""
    if result == "loading" and (active_for is None or not startup):
        return detail  # no bound known: it says it loads
    if active_for is None or active_for > startup or result not in ("fail", "loading"):
        return ""
    if result == "fail" and detail not in NOT_READY:
        return ""
    return f"{detail}, {active_for:.0f}s into its {startup:g}s start-up"


def cool_down(args: argparse.Namespace, unit: str, down_for: float | None) -> bool:
    """Start a unit systemd gave up on again once it has been down --cool-down seconds; True
    when it was started."""
    if down_for is None or down_for < args.cool_down:
        waited = "" if down_for is None else f" ({down_for:.0f}s so far)"
        again = f"to be started again after {args.cool_down:g}s down{waited}"
        log(f"{unit}: systemd gave up on it; {again}")
        return False
    log(f"{unit}: systemd gave up on it {down_for:.0f}s ago: starting {unit} again")
    start(args.systemctl, unit, "start")
    return True


def start(systemctl: str, unit: str, verb: str) -> None:
    """`systemctl reset-failed` then `verb` ("start" or "restart"): systemd counts each start
    against the unit's start limit (before systemd 254) and refuses one past it."""
    for argv in ([systemctl, "reset-failed", unit], [systemctl, verb, unit]):
        _, problem = run(argv, RESTART_TIMEOUT)
        if problem:
            log(f"{unit}: {verb} not confirmed ({problem})")
            return


class Checked(NamedTuple):
    """What one run found of one server: its outcome ('ok', 'loading', 'idle', 'failing',
    'stopped', 'busy'), the probe's seconds when one ran, and whether the canary (re)started it."""

    outcome: str
    latency: float | None = None
    restarted: bool = False
    restarts: int | None = None  # systemd's NRestarts, when read


def check(
    args: argparse.Namespace,
    target: tuple[str, str, str, str, str, float, str],
    state: Path,
    clock: Callable[[], float],
) -> Checked:
    """Probe one server, log what it found, restart it when it failed --failures times."""
    unit, url, alias, env_file, kind, startup, residency = target
    counter = state / f"{unit}.failures"
    key = read_key(env_file, "LLAMA_API_KEY" if kind == "llama" else "VLLM_API_KEY")
    unit_now, why = unit_state(args.systemctl, unit)
    verdict, restarts = unit_now.verdict, unit_now.restarts
    if verdict == "unknown":
        log(f"{unit}: FAILING: state unknown ({why})")
        return Checked("failing")
    if residency == "on_demand" and unit_now.active == "inactive":
        counter.unlink(missing_ok=True)
        log(f"{unit}: idle (on demand: stopped until a request starts it)")
        return Checked("idle", restarts=restarts)
    if verdict == "failing":
        counter.unlink(missing_ok=True)  # systemd restarted it: no longer failures in a row
        log(f"{unit}: FAILING: {unit_now.describe()}; not restarted by the canary")
        for text in journal(args.journalctl, unit, args.journal_lines, key):
            log(f"{unit}: journal: {text}")
        started = False
        if unit_now.active == "failed" and residency == "on_demand":
            # Never started by the canary: the next request starts it. A reset lets systemd
            # start it then, past a start limit it may have hit.
            run([args.systemctl, "reset-failed", unit], RESTART_TIMEOUT)
            log(f"{unit}: failed on demand; reset so that the next request starts it")
        elif unit_now.active == "failed":
            started = cool_down(args, unit, unit_now.down_for(clock()))
        return Checked("failing", restarted=started, restarts=restarts)
    if verdict == "stopped":
        log(f"{unit}: skipped (stopped)")
        return Checked("stopped", restarts=restarts)
    if verdict == "busy":
        log(f"{unit}: skipped, unit is {unit_now.shown}")
        return Checked("busy", restarts=restarts)
    began = time.monotonic()
    if kind == "llama":
        result, detail = probe(url, alias, key, args.timeout)
    else:
        result, detail = probe_openai(url, alias, key, args.timeout)
    took = time.monotonic() - began
    if result in ("fail", "loading"):
        why = loading(result, detail, unit_now.active_for(clock()), startup)
        if why:
            counter.unlink(missing_ok=True)
            log(f"{unit}: loading: {why}")
            return Checked("loading", took, restarts=restarts)
        if result == "loading":
            result = "fail"
            detail = f"{detail} after its {startup:g}s start-up"
    if kind == "balancer" and result == "fail":
        log(f"{unit}: failed through the balancer at {url} ({detail}); not restarted")
        return Checked("failing", took, restarts=restarts)
    if result != "fail":
        counter.unlink(missing_ok=True)
        log(f"{unit}: {result}: {detail}")
        return Checked("ok", took, restarts=restarts)
    count = read_count(counter) + 1
    if count < args.failures:
        counter.write_text(str(count))
        log(f"{unit}: failed ({detail}), {count} of {args.failures} before a restart")
        return Checked("failing", took, restarts=restarts)
    counter.unlink(missing_ok=True)
    log(f"{unit}: failed ({detail}) {count} times in a row: restarting {unit}")
    start(args.systemctl, unit, "restart")
    return Checked("failing", took, restarted=True, restarts=restarts)


def main(argv: list[str] | None = None, clock: Callable[[], float] = time.monotonic) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", required=True)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--timeout", type=float, default=20)
    parser.add_argument("--failures", type=int, default=2)
    parser.add_argument("--cool-down", type=float, default=300)
    parser.add_argument("--systemctl", default="systemctl")
    parser.add_argument("--journalctl", default="journalctl")
    parser.add_argument("--journal-lines", type=int, default=JOURNAL_LINES)
    parser.add_argument("--metrics-dir", default="", help="node_exporter's textfile directory")
    parser.add_argument("--nvidia-smi", default="nvidia-smi")
    args = parser.parse_args(argv)
    state = Path(args.state_dir)
    state.mkdir(parents=True, exist_ok=True)
    failed = 0
    rows: list[Row] = []
    for target in targets(Path(args.config).read_text()):
        found = check(args, target, state, clock)
        failed += found.outcome == "failing"
        if args.metrics_dir:
            rows.append(tally(state, target[0], target[4], found))
    if args.metrics_dir:
        text = exposition(rows, time.time(), *gpu_metrics(args.nvidia_smi))
        problem = write_textfile(Path(args.metrics_dir), TEXTFILE, text)
        if problem:
            log(f"metrics not written: {problem}")
    return 1 if failed else 0


# --- Metrics: node_exporter's textfile collector -------------------------------------------------

TEXTFILE = "gpuprov_canary.prom"
MIB = 1024 * 1024
# nvidia-smi --query-gpu fields, in this order (nounits: MiB, %, degrees C, W).
GPU_FIELDS = "index,uuid,name,memory.used,memory.total,utilization.gpu,temperature.gpu,power.draw"
# Per process: the GPU it holds memory on too, so that a process on two GPUs is two series.
APP_FIELDS = "pid,gpu_uuid,used_memory"


class Row(NamedTuple):
    """One server's series: its labels and values (None: no sample this run)."""

    unit: str
    service: str
    kind: str
    checked: Checked
    failed_runs: int
    canary_restarts: int


class Family(NamedTuple):
    name: str
    kind: str  # gauge or counter
    help: str


SERVICE_FAMILIES = (
    Family("gpuprov_service_up", "gauge", "1 when the last probe got a completion, else 0."),
    Family("gpuprov_service_loading", "gauge", "1 while the server loads its model, else 0."),
    Family(
        "gpuprov_service_idle",
        "gauge",
        "1 while an on-demand server is stopped until a request starts it, else 0.",
    ),
    Family(
        "gpuprov_service_probe_latency_seconds",
        "gauge",
        "Seconds the last probe (health check and a 1-token completion) took.",
    ),
    Family(
        "gpuprov_service_consecutive_failures",
        "gauge",
        "Canary runs in a row that found the server failing.",
    ),
    Family(
        "gpuprov_service_systemd_restarts",
        "gauge",
        "systemd's automatic restarts of the unit since it was last started by hand (NRestarts).",
    ),
    Family(
        "gpuprov_service_canary_restarts_total",
        "counter",
        "Restarts and starts of the unit by the gpuprov canary.",
    ),
)
GPU_FAMILIES = (
    Family("gpuprov_gpu_memory_used_bytes", "gauge", "GPU memory in use (nvidia-smi)."),
    Family("gpuprov_gpu_memory_total_bytes", "gauge", "GPU memory in all (nvidia-smi)."),
    Family("gpuprov_gpu_utilization_ratio", "gauge", "GPU utilisation, 0-1 (nvidia-smi)."),
    Family("gpuprov_gpu_temperature_celsius", "gauge", "GPU temperature (nvidia-smi)."),
    Family("gpuprov_gpu_power_watts", "gauge", "GPU power draw (nvidia-smi)."),
)
PROCESS_FAMILY = Family(
    "gpuprov_gpu_process_memory_used_bytes",
    "gauge",
    "GPU memory a process holds (nvidia-smi), with the unit its cgroup names.",
)
LAST_RUN = Family(
    "gpuprov_canary_last_run_timestamp_seconds", "gauge", "When the canary's last run ended."
)
Sample = tuple[dict[str, str], float]  # labels, value


def service_name(unit: str) -> str:
    """'alpha' for gpuprov-llama-alpha.service and gpuprov-vllm-alpha.service; 'nginx'."""
    name = unit.removesuffix(".service")
    for prefix in ("gpuprov-llama-", "gpuprov-vllm-"):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def tally(state: Path, unit: str, kind: str, found: Checked) -> Row:
    """The run's row for `unit`, with its failed runs in a row and the canary's restarts of it
    (files in the state dir, kept across runs) brought up to date."""
    runs, restarts = state / f"{unit}.failed-runs", state / f"{unit}.restarts"
    failed_runs = read_count(runs, 9) + 1 if found.outcome == "failing" else 0
    canary_restarts = read_count(restarts, 15) + found.restarted
    for path, value in ((runs, failed_runs), (restarts, canary_restarts)):
        with contextlib.suppress(OSError):  # a read-only state dir: counts start again
            path.write_text(str(value))
    return Row(unit, service_name(unit), kind, found, failed_runs, canary_restarts)


def escape_label(value: str) -> str:
    """A label value as the text format writes it: backslash, double quote and line feed
    escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def number(value: float) -> str:
    """A sample value: integers without a point, others as repr writes them."""
    if math.isfinite(value) and value == int(value) and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def family_text(family: Family, samples: Sequence[Sample]) -> list[str]:
    """HELP, TYPE and one line per sample; nothing when there are no samples."""
    if not samples:
        return []
    lines = [f"# HELP {family.name} {family.help}", f"# TYPE {family.name} {family.kind}"]
    for labels, value in samples:
        inner = ",".join(f'{k}="{escape_label(v)}"' for k, v in labels.items())
        lines.append(f"{family.name}{{{inner}}} {number(value)}")
    return lines


def exposition(
    rows: Sequence[Row],
    now: float,
    gpus: Sequence[dict[str, Any]] = (),
    apps: Sequence[Sample] = (),
) -> str:
    """The textfile: every family with its samples, then the run's timestamp."""
    per_service: dict[str, list[Sample]] = {f.name: [] for f in SERVICE_FAMILIES}
    for row in rows:
        labels = {"unit": row.unit, "service": row.service, "kind": row.kind}
        c = row.checked
        values: dict[str, float | None] = {
            "gpuprov_service_up": float(c.outcome == "ok"),
            "gpuprov_service_loading": float(c.outcome == "loading"),
            "gpuprov_service_idle": float(c.outcome == "idle"),
            "gpuprov_service_probe_latency_seconds": c.latency,
            "gpuprov_service_consecutive_failures": float(row.failed_runs),
            "gpuprov_service_systemd_restarts": None if c.restarts is None else float(c.restarts),
            "gpuprov_service_canary_restarts_total": float(row.canary_restarts),
        }
        for name, value in values.items():
            if value is not None:
                per_service[name].append((labels, value))
    lines: list[str] = []
    for family in SERVICE_FAMILIES:
        lines += family_text(family, per_service[family.name])
    for family in GPU_FAMILIES:
        samples = [(gpu["labels"], gpu[family.name]) for gpu in gpus if family.name in gpu]
        lines += family_text(family, samples)
    lines += family_text(PROCESS_FAMILY, apps)
    lines += family_text(LAST_RUN, [({}, round(now, 3))])
    return "\n".join(lines) + "\n"


def write_textfile(folder: Path, name: str, text: str) -> str:
    """Write `folder/name` atomically (a temporary file beside it, renamed over it), readable by
    node_exporter's user; "" when written, else why not."""
    temporary = ""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, 0o644)
        os.replace(temporary, folder / name)
    except OSError as exc:
        if temporary:
            Path(temporary).unlink(missing_ok=True)
        return f"{folder / name}: {exc.strerror or exc}"
    return ""


def measurement(text: str, scale: float = 1.0) -> float | None:
    """A value of nvidia-smi's CSV (nounits), scaled; None for [N/A], [Not Supported] and the
    like."""
    value = text.strip()
    if not value or len(value) > 32 or value.lower() in ("nan", "inf", "-inf", "+inf"):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number * scale if math.isfinite(number) else None


def parse_gpus(text: str) -> list[dict[str, Any]]:
    """`nvidia-smi --query-gpu=GPU_FIELDS --format=csv,noheader,nounits` as one dict per GPU:
    'labels' (gpu, uuid, name) and each family's value it has. A name with commas in it is
    rejoined; lines without the fields are skipped; a GPU index seen twice is kept once."""
    found: list[dict[str, Any]] = []
    seen: set[str] = set()
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 8:
            continue
        index, uuid, *middle = fields[:-5]
        used, total, util, temp, power = fields[-5:]
        if not (index.isdigit() and index.isascii()) or index in seen:
            continue
        seen.add(index)
        gpu: dict[str, Any] = {
            "labels": {"gpu": index, "uuid": uuid, "name": ", ".join(middle)},
        }
        for name, value in (
            ("gpuprov_gpu_memory_used_bytes", measurement(used, MIB)),
            ("gpuprov_gpu_memory_total_bytes", measurement(total, MIB)),
            ("gpuprov_gpu_utilization_ratio", measurement(util, 0.01)),
            ("gpuprov_gpu_temperature_celsius", measurement(temp)),
            ("gpuprov_gpu_power_watts", measurement(power)),
        ):
            if value is not None:
                gpu[name] = value
        found.append(gpu)
    return found


def cgroup_unit(text: str) -> str:
    """The unit (or scope) a process runs in, from /proc/PID/cgroup: the last component of its
    last line's path when it ends in .service or .scope, else ''."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    last = lines[-1].rpartition(":")[2].rstrip("/").rpartition("/")[2].strip()
    return last if last.endswith((".service", ".scope")) else ""


def parse_apps(text: str, unit_of: Callable[[str], str]) -> list[Sample]:
    """`nvidia-smi --query-compute-apps=APP_FIELDS --format=csv,noheader,nounits` as samples of
    bytes per (pid, GPU), labelled with the unit `unit_of(pid)` names; values nvidia-smi has not
    are left out, and rows for the same pid and GPU are added up."""
    held: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 3 or not (fields[0].isdigit() and fields[0].isascii()):
            continue
        value = measurement(fields[2], MIB)
        if value is not None:
            key = (fields[0], fields[1])
            held[key] = held.get(key, 0.0) + value
    return [
        ({"pid": pid, "gpu_uuid": uuid, "unit": unit_of(pid)}, value)
        for (pid, uuid), value in held.items()
    ]


def proc_unit(pid: str) -> str:
    try:
        return cgroup_unit(Path(f"/proc/{pid}/cgroup").read_text(errors="replace"))
    except OSError:
        return ""


def gpu_metrics(nvidia_smi: str) -> tuple[list[dict[str, Any]], list[Sample]]:
    """(GPUs, per-process samples) from nvidia-smi; none where it is absent or fails."""
    if not nvidia_smi or not shutil.which(nvidia_smi):
        return [], []
    fmt = "--format=csv,noheader,nounits"
    out, problem = run([nvidia_smi, f"--query-gpu={GPU_FIELDS}", fmt], SHOW_TIMEOUT)
    if problem:
        log(f"GPU metrics left out: {problem[:200]}")
        return [], []
    gpus = parse_gpus(out)
    out, problem = run([nvidia_smi, f"--query-compute-apps={APP_FIELDS}", fmt], SHOW_TIMEOUT)
    return gpus, ([] if problem else parse_apps(out, proc_unit))


if __name__ == "__main__":
    sys.exit(main())
