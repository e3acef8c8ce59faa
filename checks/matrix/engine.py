"""One engine for every rule: run each rule's evaluator over the facts and format its findings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from checks.facts.model import HostFacts
from checks.matrix import evaluators, registry

SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}


@dataclass(frozen=True)
class Finding:
    """A rule that matched: what, why and how to fix, with the rule's sources."""

    rule: str
    severity: str
    area: str
    title: str
    subject: str
    message: str
    fix: str
    citations: tuple[str, ...]


class _Fill(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "unknown"


def evaluate(
    facts: HostFacts, rules: tuple[registry.Rule, ...] | None = None, route: str | None = None
) -> list[Finding]:
    """Findings for `facts`, most severe first, then by rule ID: every rule with an evaluator (of
    `rules`, default all), or only those `route` detects."""
    findings = [
        finding(rule, match)
        for rule in (registry.rules() if rules is None else rules)
        if rule.check is not None and (route is None or route in rule.detected_by)
        for match in evaluators.EVALUATORS[rule.check](facts, rule.params)
    ]
    return ordered(findings)


def finding(rule: registry.Rule, match: Mapping[str, str]) -> Finding:
    """`rule`'s finding for one match, worded by the variant of its "case" if the rule has one;
    placeholders the match lacks read "unknown"."""
    fill = _Fill(match)
    variant = rule.variant(match.get("case"))
    message = variant.message if variant and variant.message else rule.message
    fix = variant.fix if variant and variant.fix else rule.fix
    return Finding(
        rule=rule.id,
        severity=rule.severity,
        area=rule.area,
        title=rule.title,
        subject=match.get("subject", ""),
        message=message.format_map(fill),
        fix=fix.format_map(fill),
        citations=rule.citations,
    )


def ordered(findings: list[Finding]) -> list[Finding]:
    """Most severe first, then by rule ID and subject."""
    return sorted(findings, key=lambda f: (SEVERITY_RANK[f.severity], f.rule, f.subject))


def reaches(findings: list[Finding], fail_on: str) -> bool:
    """Whether any finding is at least as severe as `fail_on` ("never" never reaches)."""
    if fail_on == "never":
        return False
    limit = SEVERITY_RANK[fail_on]
    return any(SEVERITY_RANK[f.severity] <= limit for f in findings)
