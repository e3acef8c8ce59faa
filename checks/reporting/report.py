"""The check report: facts, findings and recommendations, and its versioned JSON form."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from checks.facts.model import ContainerImage, HostFacts, to_dict
from checks.matrix import engine, images
from checks.matrix.host import host_driver
from checks.reporting import recommend

REPORT_SCHEMA_VERSION = 2

# What each image rule means for a container started from the image, in the order it happens.
_OUTCOMES = {
    "CTR-001": "refused",  # the toolkit's requirement check stops the container
    "CTR-003": "error 803",  # compat libcuda older than the host driver
    "CTR-002": "error 804",  # forward compatibility on a GPU that has none
}


@dataclass(frozen=True)
class ImageVerdict:
    """What a container of one image will do on this host, and from which of its values."""

    ref: str | None
    source: str | None
    cuda_version: str | None
    requirement: str | None  # as the NVIDIA Container Toolkit enforces it
    compat_driver: str | None  # the compat libcuda the image loads, if any
    outcome: str  # refused, error 803, error 804, no known problem, or unknown (driver unknown)
    rules: list[str]


@dataclass(frozen=True)
class Report:
    facts: HostFacts
    findings: list[engine.Finding]
    recommendations: list[recommend.Recommendation]
    images: list[ImageVerdict] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": REPORT_SCHEMA_VERSION,
            "facts": to_dict(self.facts),
            "findings": [dataclasses.asdict(f) for f in self.findings],
            "recommendations": [dataclasses.asdict(r) for r in self.recommendations],
            "images": [dataclasses.asdict(i) for i in self.images],
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=False)


def build(facts: HostFacts) -> Report:
    """Evaluate every rule and every recommendation for `facts`."""
    from checks.facts import gpus

    enriched = gpus.enrich(facts)
    findings = engine.evaluate(enriched, route="host")
    verdicts = [verdict(enriched, image, findings) for image in enriched.containers.images]
    return Report(enriched, findings, recommend.recommend(enriched), verdicts)


def verdict(
    facts: HostFacts, image: ContainerImage, findings: list[engine.Finding]
) -> ImageVerdict:
    """The outcome of starting `image` here: the first image rule it hits, else runs (or
    unknown while the host's driver is)."""
    subjects = (images.label(image), f"{images.label(image)} compat libraries")
    hit = [f.rule for f in findings if f.rule in _OUTCOMES and f.subject in subjects]
    first = next((_OUTCOMES[r] for r in _OUTCOMES if r in hit), None)
    outcome = first or ("no known problem" if host_driver(facts) is not None else "unknown")
    compat = images.compat_driver(image)
    return ImageVerdict(
        ref=image.ref,
        source=image.source,
        cuda_version=image.cuda_version,
        requirement=images.requirement(image),
        compat_driver=str(compat) if compat is not None else None,
        outcome=outcome,
        rules=sorted(set(hit)),
    )
