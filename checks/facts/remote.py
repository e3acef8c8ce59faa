"""The probes as one shell script for a remote host, and the parse of what it prints.

A remote host runs every probe in one round trip (a pyinfra fact); each probe's output is framed
by marker lines so the same pure parsers read it as they read a local run.
"""

from __future__ import annotations

import math
import re

from checks.facts.model import HostFacts, ProbeResult, merge
from checks.facts.probe import Probe

MARK = "#=gpuprov-probe="
_FRAME = re.compile(rf"^{re.escape(MARK)} (\S+) (begin|absent|end (\d+))$", re.M)


def script(probes: list[Probe]) -> str:
    """A POSIX sh script running each probe (with its timeout where `timeout` exists)."""
    parts = ["command -v timeout >/dev/null 2>&1 && T=timeout || T="]
    for i, probe in enumerate(probes):
        body = probe.command.replace("'", "'\\''")
        run = f"${{T:+$T {max(1, math.ceil(probe.timeout))}}} sh -c '{body}' 2>&1"
        end = f"printf '\\n{MARK} {i} end %d\\n' $?"
        line = f"echo '{MARK} {i} begin'; {run}; {end}"
        if probe.requires:
            line = (
                f"if command -v {probe.requires} >/dev/null 2>&1; then {line}; "
                f"else echo '{MARK} {i} absent'; fi"
            )
        parts.append(line)
    return "\n".join(parts) + "\n"


def frames(output: str) -> tuple[dict[int, str], dict[int, str]]:
    """Each framed command's state (ok, timeout, absent) and output, by its index in the script."""
    starts: dict[int, int] = {}
    bodies: dict[int, str] = {}
    status: dict[int, str] = {}
    for m in _FRAME.finditer(output):
        i = int(m.group(1))
        if m.group(2) == "absent":
            status[i] = "absent"
        elif m.group(2) == "begin":
            starts[i] = m.end() + 1
        elif i in starts:
            bodies[i] = output[starts[i] : m.start()].removesuffix("\n")  # the one printf added
            status[i] = "timeout" if m.group(3) == "124" else "ok"
    return status, bodies


def parse(probes: list[Probe], output: str, source: str) -> HostFacts:
    """Facts from the script's output; a probe whose frame is missing or cut short is 'failed'."""
    facts = HostFacts(sources=[source])
    status, bodies = frames(output)
    fragments: list[HostFacts] = []
    results: list[ProbeResult] = []
    for i, probe in enumerate(probes):
        state = status.get(i, "failed")
        if state == "absent":
            results.append(ProbeResult(probe.name, "absent", f"{probe.requires} not found"))
            continue
        if state != "ok":
            detail = f"timed out after {probe.timeout}s" if state == "timeout" else "no output"
            results.append(ProbeResult(probe.name, "failed", detail))
            continue
        try:
            fragments.append(probe.parse(bodies[i]))
        except Exception as exc:  # parsers must not raise; if one does, report it
            results.append(ProbeResult(probe.name, "unparsed", f"{type(exc).__name__}: {exc}"))
            continue
        results.append(ProbeResult(probe.name, "ok"))
    for fragment in fragments:
        merge(facts, fragment)
    facts.probes = results
    return facts
