"""Gather a host's facts on this machine: every probe at once, merged in a fixed order."""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading

from checks.facts import parsers
from checks.facts.model import HostFacts, ProbeResult, merge, probed_on
from checks.facts.probe import Probe, ProbeUnavailable


def all_probes() -> list[Probe]:
    """Every probe, in the order their facts merge (earlier ones win on conflicts)."""
    return [probe for module in parsers.modules() for probe in getattr(module, "PROBES", [])]


def run_probe(probe: Probe) -> tuple[HostFacts, ProbeResult]:
    """Run one probe here: its local fast path if it has one, else its command. Never raises."""
    fallback = None
    if probe.local is not None:
        try:
            return probe.local(), ProbeResult(probe.name, "ok", "in-process")
        except ProbeUnavailable as exc:
            fallback = str(exc)
        except Exception as exc:  # a fast path must never take the check down
            fallback = f"in-process read failed: {exc}"
    if probe.requires and shutil.which(probe.requires) is None:
        detail = f"{probe.requires} not found"
        return HostFacts(), ProbeResult(probe.name, "absent", _join(fallback, detail))
    try:
        done = subprocess.run(
            ["sh", "-c", probe.command],
            capture_output=True,
            timeout=probe.timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return HostFacts(), ProbeResult(probe.name, "failed", f"timed out after {probe.timeout}s")
    except OSError as exc:
        return HostFacts(), ProbeResult(probe.name, "failed", str(exc))
    text = (done.stdout + done.stderr).decode("utf-8", errors="replace")
    try:
        fragment = probe.parse(text)
    except Exception as exc:  # parsers must not raise; if one does, report it, don't crash
        return HostFacts(), ProbeResult(probe.name, "unparsed", f"{type(exc).__name__}: {exc}")
    return fragment, ProbeResult(probe.name, "ok", fallback)


def _join(*parts: str | None) -> str:
    return "; ".join(p for p in parts if p)


def gather(probes: list[Probe] | None = None) -> HostFacts:
    """Facts of this machine."""
    selected = all_probes() if probes is None else probes
    facts = HostFacts(sources=[probed_on("local", socket.gethostname())])
    results: list[tuple[HostFacts, ProbeResult]] = [
        (HostFacts(), ProbeResult(p.name, "failed")) for p in selected
    ]

    def run(i: int) -> None:
        results[i] = run_probe(selected[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(selected))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for fragment, result in results:
        merge(facts, fragment)
        facts.probes.append(result)
    return facts
