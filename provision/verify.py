"""After `apply`, proof that what it installed runs.

On each host that converged: every unit gpuprov manages there is active and stays active (no
restart) through a settle period, and every server answers a real completion, the canary's own
probe, within its start-up bound (llama_server_startup_seconds, vllm_startup_seconds). A unit
that fails either gets its last journal lines and what `gpuprov explain` finds in them. The
checks run on the host through provision/verify_round.py, one short round trip per round.
"""

from __future__ import annotations

import dataclasses
import io
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gevent
from pyinfra.api.command import QuoteString, StringCommand
from pyinfra.api.host import Host

from checks import packaged
from checks.facts.model import HostFacts
from checks.logs import explain, logscan
from checks.logs.explain import Diagnosis
from provision import envsecrets, host_shell, templates
from provision.hostplan import HostPlan
from provision.settings import residency

JOURNAL_LINES = 30
ROUND_PAUSE = 3.0  # seconds between rounds while a server loads
PROGRESS_EVERY = 20.0


class VerifyError(Exception):
    """The check itself could not run on the host (no python3, a broken connection)."""


@dataclass(frozen=True)
class Target:
    """A unit gpuprov manages, and how to ask its server for a completion (kind "" if none)."""

    unit: str
    kind: str = ""  # llama, openai, balancer
    url: str = ""
    model: str = ""
    env_file: str = ""
    startup: int = 0  # seconds the server may take to answer

    def probe(self) -> list[str]:
        return [self.unit, self.url, self.model, self.env_file, self.kind]


@dataclass
class UnitResult:
    unit: str
    ok: bool
    state: str  # ActiveState/SubState at the end
    detail: str
    restarts: int = 0  # automatic restarts during the check
    journal: list[str] = field(default_factory=list)
    diagnoses: list[Diagnosis] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "ok": self.ok,
            "state": self.state,
            "detail": self.detail,
            "restarts": self.restarts,
            "journal": self.journal,
            "diagnoses": [dataclasses.asdict(d) for d in self.diagnoses],
        }


@dataclass
class Verification:
    settle: float
    units: list[UnitResult] = field(default_factory=list)
    error: str = ""  # the check could not run
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.error and all(u.ok for u in self.units)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "settle_seconds": self.settle,
            "error": self.error or None,
            "notes": self.notes,
            "units": [u.to_json() for u in self.units],
        }


def targets(plan: HostPlan) -> list[Target]:
    """Every unit the host's stack runs, with its server's probe where it has one."""
    v, s = plan.variables, plan.stack
    startup = {"llama": s.server_startup, "openai": s.vllm.startup, "balancer": s.vllm.startup}
    servers = s.profiles or s.vllm.replicas
    table = templates.render(
        "canary",
        "canary.tsv.j2",
        profiles=[dataclasses.asdict(p) for p in s.profiles],
        replicas=[dataclasses.asdict(r) for r in s.vllm.replicas],
        **v,
    )
    on_demand = {p.unit: (p.socket_unit, p.host, p.port) for p in s.profiles if p.on_demand}
    on_demand |= {r.unit: (r.socket_unit, r.host, r.port) for r in s.vllm.replicas if r.on_demand}
    found = []
    for line in table.splitlines():
        if line.strip() and not line.startswith("#"):
            unit, url, model, env_file, kind, *_ = line.split("\t")
            if not s.canary.enabled:  # the probe is the canary's: without it, units only
                kind = ""
            socket = on_demand.get(unit)
            if socket is not None:  # its socket must listen; a request through it wakes it
                unit, url = socket[0], residency.public_url(socket[1], socket[2])
            found.append(Target(unit, kind, url, model, env_file, startup.get(kind, 0)))
    units = {t.unit for t in found}
    if s.balancer.enabled and "nginx.service" not in units:
        found.append(Target("nginx.service"))
    if s.canary.enabled and servers:
        found.append(Target("gpuprov-canary.timer"))
    return found


def script() -> str:
    return packaged.path("provision", "verify_round.py").read_text(encoding="utf-8")


def check_round(host: Host, plan: HostPlan, units: list[str], probes: list[Target]) -> Any:
    """Run verify_round.py on the host once; its parsed JSON."""
    request = {
        "units": units,
        "probes": [t.probe() for t in probes],
        "canary": plan.variables["canary_script"] if plan.stack.canary.enabled else "",
        "timeout": plan.stack.canary.timeout,
    }
    command = StringCommand(
        "python3", "-c", QuoteString(script()), QuoteString(json.dumps(request))
    )
    ok, output = host_shell.run(host, command)
    lines = [line for line in output.stdout_lines if line.startswith("{")]
    if not ok or not lines:
        said = next((ln for ln in reversed(output.stderr_lines) if ln.strip()), "no output")
        raise VerifyError(f"the post-apply check could not run on the host: {said.strip()}")
    try:
        return json.loads(lines[-1])
    except ValueError as exc:
        raise VerifyError(f"the post-apply check printed no JSON: {exc}") from exc


def journal(host: Host, unit: str) -> list[str]:
    """The unit's last journal lines, with every secret gpuprov holds masked."""
    command = StringCommand(
        "journalctl", "-u", QuoteString(unit), "-n", str(JOURNAL_LINES), "--no-pager", "-o", "cat"
    )
    _, output = host_shell.run(host, command)
    return [envsecrets.scrub(line.rstrip()) for line in output.stdout_lines][-JOURNAL_LINES:]


def diagnose(lines: list[str], facts: HostFacts | None) -> list[Diagnosis]:
    """What `gpuprov explain` finds in a unit's journal lines."""
    scanned = logscan.scan(io.BytesIO("\n".join(lines).encode()), use_grep=False)
    return explain.diagnose(scanned, facts)


def _state(props: dict[str, str]) -> str:
    active, sub = props.get("ActiveState", "unknown"), props.get("SubState", "")
    return f"{active} ({sub})" if sub else active


def _restarts(props: dict[str, str]) -> int:
    text = props.get("NRestarts", "")
    return int(text) if text.isdigit() else 0


class _Watch:
    """One host's check: unit states against their first reading, probes until answered."""

    def __init__(self, found: list[Target], first: dict[str, dict[str, str]]) -> None:
        self.targets = found
        self.first = first
        self.failed: dict[str, tuple[str, str, int]] = {}  # unit: (state, detail, restarts)
        self.answered: dict[str, str] = {}
        self.last: dict[str, str] = {}  # unit: the last probe's detail

    def states(self, now: dict[str, dict[str, str]], settled: bool) -> None:
        for t in self.targets:
            if t.unit in self.failed:
                continue
            before, props = self.first.get(t.unit, {}), now.get(t.unit, {})
            restarts = _restarts(props) - _restarts(before)
            started = before.get("ExecMainStartTimestampMonotonic", "0")
            if restarts > 0 or (
                started not in ("", "0") and props.get("ExecMainStartTimestampMonotonic") != started
            ):
                status = props.get("ExecMainStatus", "?")
                detail = f"restarted {restarts} times (last exit status {status})"
                self.failed[t.unit] = (_state(props), detail, restarts)
            elif settled and props.get("ActiveState") != "active":
                detail = f"not active: {_state(props)}, result {props.get('Result', '?')}"
                self.failed[t.unit] = (_state(props), detail, restarts)

    def probes(self, replies: dict[str, list[str]], elapsed: float) -> None:
        for t in self.pending():
            result, detail = (replies.get(t.unit) or ["fail", "no reply"])[:2]
            self.last[t.unit] = f"{result}: {detail}"
            if result in ("ok", "not run"):
                self.answered[t.unit] = f"{result}: {detail}"
            elif elapsed > t.startup:
                detail = f"no completion within {t.startup}s (last probe: {result}, {detail})"
                self.failed[t.unit] = ("active", detail, 0)

    def pending(self) -> list[Target]:
        return [
            t
            for t in self.targets
            if t.kind and t.unit not in self.answered and t.unit not in self.failed
        ]


def verify(
    host: Host,
    plan: HostPlan,
    settle: float,
    progress: Callable[[str], None],
    clock: Callable[[], float] = time.monotonic,
) -> Verification:
    """The post-apply check of one host."""
    result = Verification(settle)
    found = targets(plan)
    if not found:
        return result
    if not plan.stack.canary.enabled:
        result.notes.append("completions not checked: the canary (its probe) is turned off")
    units = [t.unit for t in found]
    try:
        began = clock()
        watch = _Watch(found, check_round(host, plan, units, [])["units"])
        gevent.sleep(settle)
        said = clock()
        while True:
            reply = check_round(host, plan, units, watch.pending())
            watch.states(reply["units"], settled=True)
            watch.probes(reply["probes"], clock() - began)
            waiting = watch.pending()
            if not waiting:
                break
            if clock() - said >= PROGRESS_EVERY:
                said = clock()
                for t in waiting:
                    progress(
                        f"{plan.name}: waiting for {t.unit} to answer "
                        f"({watch.last.get(t.unit, '')}; {clock() - began:.0f}s of {t.startup}s)"
                    )
            gevent.sleep(ROUND_PAUSE)
        final = reply["units"]
    except VerifyError as exc:
        result.error = str(exc)
        return result
    for t in found:
        props = final.get(t.unit, {})
        if t.unit in watch.failed:
            state, detail, restarts = watch.failed[t.unit]
            lines = journal(host, t.unit)
            result.units.append(
                UnitResult(
                    t.unit, False, state, detail, restarts, lines, diagnose(lines, plan.gate.facts)
                )
            )
            continue
        answer = watch.answered.get(t.unit, "")
        if answer.startswith("not run"):
            result.notes.append(f"{t.unit}: completion not checked ({answer.split(': ', 1)[-1]})")
        detail = f"active for {settle:.0f}s+" + (f", {answer}" if answer else "")
        result.units.append(UnitResult(t.unit, True, _state(props), detail))
    return result


def verify_all(
    hosts: dict[Host, HostPlan], settle: float, progress: Callable[[str], None]
) -> dict[str, Verification]:
    """Every host's check, all hosts at once."""
    jobs = {h.name: gevent.spawn(verify, h, plan, settle, progress) for h, plan in hosts.items()}
    gevent.joinall(list(jobs.values()))
    out = {}
    for name, job in jobs.items():
        if job.successful():
            out[name] = job.value
        else:
            out[name] = Verification(settle, error=f"the post-apply check failed: {job.exception}")
    return out
