"""`gpuprov logs INVENTORY SERVICE`: a managed service's journal from every host that runs it.

The journal is read over the hosts' SSH connections (with their sudo settings), every secret the
inventory holds is masked in it, and `--explain` adds what `gpuprov explain` finds there.
"""

from __future__ import annotations

import re

from pyinfra.api.command import QuoteString, StringCommand
from pyinfra.api.host import Host

from checks.reporting.status import LogsReport, ServiceLog
from provision import deploy, envsecrets, fleet_check, host_shell, status, verify

# journalctl's own --since forms: a date, a time, or a relative offset ("-1h", "2 hours ago").
_SINCE = re.compile(r"[\w :+.-]{1,40}")


class LogsError(Exception):
    """A bad request (an unknown service, a bad --since): exit 2, the message says why."""


def command(unit: str, since: str | None, lines: int) -> StringCommand:
    """journalctl of one unit, oldest first, with ISO timestamps."""
    args = ["journalctl", "-u", QuoteString(unit), "--no-pager", "-o", "short-iso"]
    if since:
        args += ["--since", QuoteString(since)]
    if lines > 0:
        args += ["-n", str(lines)]
    return StringCommand(*args)


def run(
    inventory: str,
    limit: list[str] | None,
    service: str,
    since: str | None,
    lines: int,
    explained: bool,
) -> LogsReport:
    """Each host's journal of `service`; LogsError or deploy.InventoryError before any read."""
    if since is not None and _SINCE.fullmatch(since) is None:
        raise LogsError(f"--since {since!r}: give a time journalctl reads, e.g. -1h or 2026-11-24")
    plan = deploy.start(inventory, limit, diff=False)
    try:
        units: dict[str, str] = {}
        known: set[str] = set()
        for name, (host_stack, _) in plan.stacks.items():
            for s in status.managed(host_stack):
                known.add(s.name)
                if s.name == service:
                    units[name] = s.unit
        if not units:
            names = ", ".join(sorted(known)) or "none"
            raise LogsError(f"{inventory}: no service {service!r} (its services: {names})")
        hosts = [
            h
            for h in plan.state.inventory.iter_activated_hosts()
            if h.name in units and not plan.outcomes[h.name].skipped
        ]

        def read(h: Host) -> str:
            ok, output = host_shell.run(h, command(units[h.name], since, lines))
            text = "\n".join(output.stdout_lines)
            if not ok:
                raise RuntimeError(" ".join(output.stderr_lines)[-300:] or "journalctl failed")
            return text

        texts = fleet_check.on_each(plan.state, hosts, read)
    finally:
        deploy.finish(plan)
    logs = []
    for name, unit in units.items():
        skipped = plan.outcomes[name].skipped
        text, error = texts.get(name, (None, skipped or "not read"))
        if text is None:
            logs.append(ServiceLog(name, unit, error, [], None))
            continue
        masked = [envsecrets.scrub(line) for line in text.splitlines()]
        found = verify.diagnose(masked, None) if explained else None
        logs.append(ServiceLog(name, unit, None, masked, found))
    return LogsReport(inventory, service, logs)
