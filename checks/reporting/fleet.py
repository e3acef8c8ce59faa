"""The check of a whole inventory: one report per host, and which hosts share which finding."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from checks.facts.model import HostFacts, to_dict
from checks.matrix import engine
from checks.reporting import recommend, report

FLEET_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class FleetHost:
    """One host: its report, or why it could not be checked (facts None, nothing judged)."""

    name: str
    error: str | None
    facts: HostFacts | None
    findings: list[engine.Finding]
    recommendations: list[recommend.Recommendation]
    images: list[report.ImageVerdict]


@dataclass(frozen=True)
class SharedFinding:
    """A rule and every host it fired on (hosts in inventory order)."""

    rule: str
    severity: str
    title: str
    hosts: list[str]


@dataclass(frozen=True)
class FleetReport:
    inventory: str
    hosts: list[FleetHost]
    shared: list[SharedFinding]

    @property
    def unreachable(self) -> list[FleetHost]:
        return [h for h in self.hosts if h.error is not None]

    def findings(self) -> list[engine.Finding]:
        return [f for h in self.hosts for f in h.findings]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": FLEET_SCHEMA_VERSION,
            "inventory": self.inventory,
            "hosts": [
                {
                    "name": h.name,
                    "error": h.error,
                    "facts": to_dict(h.facts) if h.facts is not None else None,
                    "findings": [dataclasses.asdict(f) for f in h.findings],
                    "recommendations": [dataclasses.asdict(r) for r in h.recommendations],
                    "images": [dataclasses.asdict(i) for i in h.images],
                }
                for h in self.hosts
            ],
            "shared": [dataclasses.asdict(s) for s in self.shared],
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2)


def build(inventory: str, hosts: list[tuple[str, HostFacts | None, str | None]]) -> FleetReport:
    """Judge every host that answered; (name, facts, error) in inventory order."""
    out = []
    for name, facts, error in hosts:
        if facts is None:
            out.append(FleetHost(name, error or "not checked", None, [], [], []))
            continue
        one = report.build(facts)
        out.append(FleetHost(name, None, one.facts, one.findings, one.recommendations, one.images))
    return FleetReport(inventory, out, shared(out))


def shared(hosts: list[FleetHost]) -> list[SharedFinding]:
    """Each rule that fired, with the hosts it fired on: most hosts first, then most severe."""
    found: dict[str, SharedFinding] = {}
    for host in hosts:
        for f in host.findings:
            entry = found.setdefault(f.rule, SharedFinding(f.rule, f.severity, f.title, []))
            if host.name not in entry.hosts:
                entry.hosts.append(host.name)
    rank = engine.SEVERITY_RANK
    return sorted(found.values(), key=lambda s: (-len(s.hosts), rank[s.severity], s.rule))
