"""The check report: facts, findings and recommendations, and its versioned JSON form."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from checks.facts.model import HostFacts, to_dict
from checks.matrix import engine
from checks.reporting import recommend

REPORT_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Report:
    facts: HostFacts
    findings: list[engine.Finding]
    recommendations: list[recommend.Recommendation]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": REPORT_SCHEMA_VERSION,
            "facts": to_dict(self.facts),
            "findings": [dataclasses.asdict(f) for f in self.findings],
            "recommendations": [dataclasses.asdict(r) for r in self.recommendations],
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=False)


def build(facts: HostFacts) -> Report:
    """Evaluate every rule and every recommendation for `facts`."""
    from checks.facts import gpus

    enriched = gpus.enrich(facts)
    return Report(enriched, engine.evaluate(enriched, route="host"), recommend.recommend(enriched))
