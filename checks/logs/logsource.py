"""Where logs come from (files, stdin, journalctl, docker logs) and explaining each one."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, BinaryIO

from checks import inputs
from checks.facts.model import HostFacts
from checks.logs import explain, logscan

EXPLAIN_SCHEMA_VERSION = 1


class LogError(Exception):
    """A log that cannot be read; the message names it."""


@dataclass(frozen=True)
class Source:
    """A file path, "-" for stdin, or a command whose output is the log."""

    name: str
    path: str | None = None
    command: tuple[str, ...] = ()


@dataclass(frozen=True)
class Result:
    source: str
    lines: int | None
    bytes: int | None
    diagnoses: list[explain.Diagnosis]


def plan(logs: list[str], journal: str | None, docker: str | None) -> list[Source]:
    sources = [Source("<stdin>" if p == "-" else p, path=p) for p in logs]
    if journal:
        command = ("journalctl", "-u", journal, "--no-pager", "-o", "short-iso")
        sources.append(Source(f"journalctl -u {journal}", command=command))
    if docker:
        sources.append(Source(f"docker logs {docker}", command=("docker", "logs", docker)))
    return sources


def _scan_file(source: Source) -> logscan.Scan:
    if source.path == "-":
        return logscan.scan(sys.stdin.buffer)
    try:
        with inputs.open_input(source.path or "") as stream:
            return logscan.scan(stream)
    except OSError as exc:
        raise LogError(f"{source.name}: cannot read: {exc.strerror or exc}") from exc


def _scan_command(source: Source) -> logscan.Scan:
    if shutil.which(source.command[0]) is None:
        raise LogError(f"{source.name}: {source.command[0]} not found")
    with subprocess.Popen(
        source.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
    ) as proc:
        stream: BinaryIO = proc.stdout  # type: ignore[assignment]
        result = logscan.scan(stream)
    if proc.returncode != 0 and not result.hits and not result.fact_text:
        raise LogError(f"{source.name}: exited {proc.returncode} and printed nothing known")
    return result


def explain_all(sources: list[Source], host: HostFacts | None) -> list[Result]:
    """Scan and diagnose every source; raises LogError for the first that cannot be read."""
    results = []
    for source in sources:
        scan = _scan_command(source) if source.command else _scan_file(source)
        results.append(Result(source.name, scan.lines, scan.bytes, explain.diagnose(scan, host)))
    return results


def to_json(results: list[Result]) -> dict[str, Any]:
    """`gpuprov explain --json`: checks/reporting/schemas/explain.schema.json."""
    return {
        "schema_version": EXPLAIN_SCHEMA_VERSION,
        "logs": [dataclasses.asdict(r) for r in results],
    }
