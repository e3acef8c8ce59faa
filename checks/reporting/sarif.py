"""Findings as SARIF 2.1.0, for code scanning in CI (GitHub, GitLab).

One run: every matrix rule as a reportingDescriptor, one result per finding per subject. A log's
result points at its file and first evidence line; a host's names the host as a logical location
and, when given, the inventory file. A host that could not be checked is an error notification
of the invocation, which then did not succeed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from importlib import metadata
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from checks.matrix import registry
from checks.matrix.engine import Finding
from checks.reporting.ci_subjects import HOST, LEVELS, Subject, area, first_line, where

if TYPE_CHECKING:
    from checks.logs.explain import Diagnosis

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
# The key of partialFingerprints: its version changes if what it hashes ever does.
FINGERPRINT = "gpuprovFinding/v1"


def sarif(runs: Sequence[Subject], inventory: str | None = None) -> dict[str, Any]:
    """The SARIF log for `runs`; `inventory` is the file the hosts came from, if any."""
    rules = registry.rules()
    index = {rule.id: i for i, rule in enumerate(rules)}
    results = [
        result(subject, item, index.get(item.rule), inventory)
        for subject in runs
        for item in subject.findings
    ]
    notifications = [_unreachable(s) for s in runs if s.unreachable is not None]
    invocation: dict[str, Any] = {"executionSuccessful": not notifications}
    if notifications:
        invocation["toolExecutionNotifications"] = notifications
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {"driver": driver(rules)},
                "invocations": [invocation],
                "results": results,
            }
        ],
    }


def driver(rules: Sequence[registry.Rule]) -> dict[str, Any]:
    """The tool component: gpuprov, its version and home page when installed, and `rules`."""
    out: dict[str, Any] = {"name": "gpuprov"}
    try:
        meta = metadata.metadata("gpuprov")
    except metadata.PackageNotFoundError:
        meta = None
    if meta is not None:
        out["version"] = meta["Version"]
        home = _home_page(meta.get_all("Project-URL") or [], meta.get_all("Home-page") or [])
        if home:
            out["informationUri"] = home
    out["rules"] = [descriptor(rule) for rule in rules]
    return out


def _home_page(project_urls: list[str], home_page: list[str]) -> str | None:
    """The package's home page: a "Homepage" Project-URL, else the Home-page field."""
    for entry in project_urls:
        label, _, url = entry.partition(",")
        if label.strip().lower().replace("-", "") == "homepage" and url.strip():
            return url.strip()
    return next((url for url in home_page if url.strip()), None)


def descriptor(rule: registry.Rule) -> dict[str, Any]:
    """One matrix rule as a SARIF reportingDescriptor."""
    docs = rule.docs()
    return {
        "id": rule.id,
        "name": rule_name(rule.title),
        "shortDescription": {"text": rule.title},
        "fullDescription": {"text": " ".join(rule.why.split())},
        "help": {"text": docs, "markdown": docs},
        "helpUri": rule.citations[0],
        "defaultConfiguration": {"level": LEVELS[rule.severity]},
        "properties": {
            "area": rule.area,
            "detected_by": list(rule.detected_by),
            "tags": list(dict.fromkeys((rule.area, *rule.detected_by))),
        },
    }


def rule_name(title: str) -> str:
    """A rule's title as one PascalCase word ("nvcc is too old" -> "NvccIsTooOld")."""
    words = re.split(r"[^0-9A-Za-z]+", re.sub(r"['\u2019]", "", title))
    return "".join(w[0].upper() + w[1:] for w in words if w)


def result(
    subject: Subject, item: Finding | Diagnosis, rule_index: int | None, inventory: str | None
) -> dict[str, Any]:
    """One finding of `subject` as a SARIF result."""
    out: dict[str, Any] = {"ruleId": item.rule}
    if rule_index is not None:
        out["ruleIndex"] = rule_index
    out["level"] = LEVELS.get(item.severity, "warning")
    out["message"] = {"text": f"{item.message}\nFix: {item.fix}"}
    out["locations"] = [location(subject, item, inventory)]
    out["partialFingerprints"] = {FINGERPRINT: fingerprint(item.rule, where(item), subject.name)}
    properties: dict[str, Any] = {"area": area(item)}
    if where(item):
        properties["subject"] = where(item)
    if not isinstance(item, Finding):
        properties["signature"] = item.signature
        properties["count"] = item.count
    out["properties"] = properties
    return out


def location(subject: Subject, item: Finding | Diagnosis, inventory: str | None) -> dict[str, Any]:
    """Where a result is: the log file and line, or the host (and the inventory naming it)."""
    if subject.kind == HOST:
        out: dict[str, Any] = {"logicalLocations": [{"name": subject.name, "kind": HOST}]}
        if inventory:
            out["physicalLocation"] = {"artifactLocation": {"uri": file_uri(inventory)}}
        return out
    physical: dict[str, Any] = {"artifactLocation": {"uri": file_uri(subject.name)}}
    line = first_line(item)
    if line is not None and line >= 1:
        physical["region"] = {"startLine": line}
    return {"physicalLocation": physical}


def file_uri(path: str) -> str:
    """A file path as a URI reference (relative paths stay relative)."""
    return quote(path.replace("\\", "/"))


def fingerprint(rule: str, what: str, name: str) -> str:
    """The same rule about the same thing on the same host or log: the same value every run."""
    return hashlib.sha256("\0".join((rule, what, name)).encode()).hexdigest()


def _unreachable(subject: Subject) -> dict[str, Any]:
    return {
        "level": "error",
        "message": {"text": f"{subject.name}: {subject.unreachable}"},
        "locations": [{"logicalLocations": [{"name": subject.name, "kind": subject.kind}]}],
    }
