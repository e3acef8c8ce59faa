"""`gpuprov plan` and `gpuprov apply`: the gate, the plan with file diffs, the run, a summary."""

from __future__ import annotations

import dataclasses
import logging
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import typer

from checks.matrix.engine import Finding
from checks.reporting.ci_subjects import Subject
from checks.reporting.schema import CONVERGE_SCHEMA_VERSION
from provision import ci_output, deploy, render, verify, vram
from provision import gate as gates
from provision.deploy import HostOutcome, Run
from provision.hostplan import HostPlan
from provision.output import emit, printable

STATUS_STYLE = {"changed": "yellow", "will change": "yellow", "failed": "red", "not run": "dim"}


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def no_known_hosts_file(record: logging.LogRecord) -> bool:
    """False for pyinfra's warning that a known_hosts file is absent: there is nothing to load
    yet, and the first connection writes it (accept-new). A damaged file still warns."""
    missing = isinstance(record.args, tuple) and any(
        isinstance(a, FileNotFoundError) for a in record.args
    )
    return not (missing and str(record.msg).startswith("Failed to load host keys"))


def pyinfra_logging(verbose: bool) -> None:
    """pyinfra's own messages (progress, file diffs) to stderr."""
    logger = logging.getLogger("pyinfra")
    logger.handlers[:] = [logging.StreamHandler(sys.stderr)]
    logger.handlers[0].setFormatter(logging.Formatter("%(message)s"))
    logger.handlers[0].addFilter(no_known_hosts_file)
    logger.setLevel(logging.INFO if verbose else logging.WARNING)
    logger.propagate = False


def _gate_lines(outcome: HostOutcome) -> list[str]:
    gate = outcome.gate
    if gate is None:
        return []
    lines = [f"  error   {p}" for p in gate.problems]
    if gate.plan:
        kind = f"CUDA {';'.join(gate.plan.archs)}" if gate.plan.cuda else "CPU-only"
        lines.append(f"  build   {gate.plan.name} ({kind})")
    if gate.install_cuda:
        lines.append(f"  cuda    install CUDA {gate.install_cuda} (no good toolkit installed)")
    if gate.image:
        state = "present" if gate.image_present else "to pull, then checked against the driver"
        lines.append(f"  image   {gate.image} ({state}; {gate.image_detail})")
    lines += [f"  toolkit {line}" for line in gate.toolkit]
    if gate.budget is not None:
        lines.append("  VRAM budget:")
        lines += [f"    {line}" for line in gate.budget.lines()]
    return lines


def report(run: Run, applied: bool) -> None:
    for name, outcome in run.outcomes.items():
        changes = [op for op in outcome.ops if op.status != "unchanged"]
        if outcome.skipped:
            head = f"{name}: not changed: {outcome.skipped}"
        elif applied:
            failed = sum(op.status == "failed" for op in outcome.ops)
            head = (
                f"{name}: {outcome.changed} changed, "
                f"{len(outcome.ops) - outcome.changed - failed} unchanged"
                + (f", {failed} FAILED" if failed else "")
                + ("" if outcome.converged or failed else "; services FAILING")
            )
        else:
            head = f"{name}: {len(changes)} to change, {len(outcome.ops) - len(changes)} unchanged"
        print(head)
        if outcome.gate is not None:
            shown, notes = _findings(outcome.gate)
            if shown:
                render.print_problems(shown, notes)
        for line in _gate_lines(outcome):
            print(line)
        for op in changes:
            print(f"  {op.status:11} {op.name}")
        if outcome.verification is not None:
            _verification(outcome.verification)


def _verification(result: verify.Verification) -> None:
    """The post-apply check: one line per unit; a failed one with its journal and diagnosis."""
    if result.error:
        print(f"  NOT VERIFIED {result.error}")
    for u in result.units:
        print(f"  {'running' if u.ok else 'FAILING':11} {u.unit}: {u.detail}")
        if u.ok:
            continue
        print(f"      state {u.state}; last {len(u.journal)} journal lines:")
        for line in u.journal:
            print(f"      | {printable(line)}")
        if u.diagnoses:
            render.print_problems(u.diagnoses)
        else:
            print(f"      no known cause in these lines: see `journalctl -u {u.unit}`")
    for note in result.notes:
        print(f"  note        {note}")


def _findings(gate: gates.HostGate) -> tuple[list[Finding], list[str]]:
    """Errors and warnings to show, each error noted with whether it blocks and why; an error
    about something this inventory does not deploy is shown as a warning."""
    verdicts = {id(f): (blocks, why) for f, blocks, why in gate.errors()}
    shown, notes = [], []
    for f in gate.findings:
        if f.severity == "warning":
            shown.append(f)
            notes.append("")
        elif id(f) in verdicts:
            blocks, why = verdicts[id(f)]
            shown.append(f if blocks else dataclasses.replace(f, severity="warning"))
            notes.append(f"Blocks apply: {why}" if blocks else f"Not blocking: {why}")
    return shown, notes


@dataclass(frozen=True)
class Converge:
    """What `gpuprov plan` would change on each host, or what `gpuprov apply` changed."""

    run: Run
    applied: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": CONVERGE_SCHEMA_VERSION,
            "inventory": self.run.inventory_path,
            "applied": self.applied,
            "hosts": {
                name: _host_json(o, self.applied, self.run.plans.get(name))
                for name, o in self.run.outcomes.items()
            },
        }


@render.view.register
def _view(model: Converge, redacted: bool = False) -> None:
    report(model.run, model.applied)


def _finding_json(f: Finding, verdicts: dict[int, tuple[bool, str]]) -> dict[str, Any]:
    blocks, why = verdicts.get(id(f), (False, ""))
    return {**dataclasses.asdict(f), "blocks": blocks, "blocks_why": why or None}


def _host_json(o: HostOutcome, applied: bool, plan: HostPlan | None = None) -> dict[str, Any]:
    gate = o.gate
    verdicts = {id(f): (b, why) for f, b, why in gate.errors()} if gate else {}
    return {
        "skipped": o.skipped or None,
        "findings": [_finding_json(f, verdicts) for f in (gate.findings if gate else [])],
        "problems": gate.problems if gate else [],
        "build": (
            {"name": gate.plan.name, "cuda_architectures": list(gate.plan.archs)}
            if gate and gate.plan
            else None
        ),
        "image": (
            {"ref": gate.image, "present": gate.image_present, "detail": gate.image_detail}
            if gate and gate.image
            else None
        ),
        "vram": _budget_json(gate.budget) if gate and gate.budget else None,
        "operations": [{"name": op.name, "status": op.status} for op in o.ops],
        "changed": o.changed if applied else sum(op.status == "will change" for op in o.ops),
        "failed": o.failed,
        "balancer_diff": plan.balancer_diff if plan else None,
        "verification": o.verification.to_json() if o.verification else None,
    }


def _budget_json(budget: vram.Budget) -> dict[str, Any]:
    return {"fits": budget.fits, "problems": list(budget.problems), "table": budget.lines()}


def converge(
    inventory: str,
    limit: list[str] | None,
    *,
    apply: bool,
    yes: bool = False,
    force: bool = False,
    as_json: bool = False,
    lock_timeout: float = 900,
    settle: float = 10,
    prune_builds: int = 0,
    ci_format: ci_output.CiFormat | None = None,
) -> int:
    run = _start(f"gpuprov: checking {inventory}", inventory, limit, as_json)
    if run is None:
        return 2
    try:
        if not apply:
            deploy.gate(run)
            deploy.add_operations(run, force, prune_builds)
            if ci_format is not None:
                ci_output.emit(ci_format, gate_subjects(run), "gpuprov plan", inventory)
            else:
                _output(run, False, as_json)
            return _code(run)
        with stopped_by_signals(), deploy.locked(run, lock_timeout, _say):
            deploy.gate(run)
            deploy.add_operations(run, force, prune_builds)
            refused = _confirmed(run, yes, as_json, "apply", "Apply these changes?")
            if refused is not None:
                return refused
            if _pending(run):
                deploy.execute(run)
            elif not any(o.skipped for o in run.outcomes.values()):
                _say("gpuprov: nothing to change")
            deploy.check(run, settle, _say)
        _output(run, True, as_json)
        return _code(run)
    finally:
        deploy.finish(run)


def uninstall(
    inventory: str,
    limit: list[str] | None,
    *,
    yes: bool = False,
    as_json: bool = False,
    lock_timeout: float = 900,
) -> int:
    """Remove what gpuprov installed on every host (its units, files, builds, folders and
    user); models, the model cache, pulled images, drivers, CUDA and packages stay. The plan of
    removals is shown first; nothing changes without a yes."""
    said = f"gpuprov: reading what {inventory} installed"
    run = _start(said, inventory, limit, as_json, need_secrets=False)
    if run is None:
        return 2
    try:
        with stopped_by_signals(), deploy.locked(run, lock_timeout, _say):
            deploy.add_removals(run)
            pending = _pending(run)
            refused = _confirmed(run, yes, as_json, "uninstall", "Remove all of this?")
            if refused is not None:
                return refused
            if pending:
                deploy.execute(run)
            elif not any(o.skipped for o in run.outcomes.values()):
                _say("gpuprov: nothing installed by gpuprov was found")
        _output(run, pending, as_json)
        return 0 if all(not o.skipped and not o.failed for o in run.outcomes.values()) else 1
    finally:
        deploy.finish(run)


def gate_subjects(run: Run) -> list[Subject]:
    """Each host's gate findings for SARIF/JUnit; a host that was not planned says why."""
    out = []
    for name, o in run.outcomes.items():
        if o.gate is None:
            out.append(Subject(name, "host", (), o.skipped or "not checked"))
        else:
            out.append(Subject(name, "host", _findings(o.gate)[0]))
    return out


def _start(
    said: str, inventory: str, limit: list[str] | None, as_json: bool, need_secrets: bool = True
) -> Run | None:
    """deploy.start with its progress and errors on stderr; None for a bad inventory (exit 2)."""
    pyinfra_logging(not as_json)
    _say(said)
    try:
        run = deploy.start(inventory, limit, diff=not as_json, need_secrets=need_secrets)
    except deploy.InventoryError as exc:
        _say(f"gpuprov: {exc}")
        return None
    for name, reason in run.unreachable.items():
        _say(f"gpuprov: cannot connect to {name}: {reason}")
    return run


def _pending(run: Run) -> bool:
    return any(op.status == "will change" for o in run.outcomes.values() for op in o.ops)


def _confirmed(run: Run, yes: bool, as_json: bool, verb: str, question: str) -> int | None:
    """None to go on; else the exit code: 2 without a terminal to ask on, 1 when refused."""
    if not _pending(run) or yes:
        return None
    if not sys.stdin.isatty():
        _output(run, False, as_json)
        _say(f"gpuprov: not a terminal: pass -y to {verb}")
        return 2
    report(run, False)
    return None if typer.confirm(question) else 1


class Stopped(SystemExit):
    """SIGTERM or SIGHUP during an apply: unwinds like Ctrl-C, releasing the locks on the way."""


STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _stop(signum: int, frame: object) -> None:
    _say(f"gpuprov: stopped by {signal.Signals(signum).name}; releasing the apply locks")
    raise Stopped(1)


@contextmanager
def stopped_by_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP (SIGINT already raises KeyboardInterrupt) end the apply through the
    `finally` blocks that release its locks; the handlers before are restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.signal(s, _stop) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def _output(run: Run, applied: bool, as_json: bool) -> None:
    emit(Converge(run, applied), as_json)


def _code(run: Run) -> int:
    return 0 if all(o.converged for o in run.outcomes.values()) else 1
