"""What the CI renderings (SARIF, JUnit XML) report on: hosts and logs, each with its findings."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from checks.matrix import registry
from checks.matrix.engine import Finding

if TYPE_CHECKING:
    from checks.logs.explain import Diagnosis

HOST = "host"
LOG = "log"
# SARIF's levels for the matrix's severities.
LEVELS = {"error": "error", "warning": "warning", "info": "note"}
# Characters XML 1.0 cannot hold, even escaped (C0 controls but tab and newlines, surrogates).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


@dataclass(frozen=True)
class Subject:
    """One host (`gpuprov check`, the gate) or one log (`gpuprov explain`) and what it showed.

    `unreachable` says why a host could not be checked; its findings are then empty.
    """

    name: str
    kind: Literal["host", "log"]
    findings: Sequence[Finding | Diagnosis] = ()
    unreachable: str | None = None


def area(item: Finding | Diagnosis) -> str:
    """The area of the item's rule (a Diagnosis does not carry it)."""
    if isinstance(item, Finding):
        return item.area
    rule = registry.rule(item.rule)
    return rule.area if rule is not None else ""


def where(item: Finding | Diagnosis) -> str:
    """What on the host the finding is about ("GPU 0", an image); "" for a log's diagnosis."""
    return item.subject if isinstance(item, Finding) else ""


def first_line(item: Finding | Diagnosis) -> int | None:
    """The line number of a diagnosis's first evidence line (1-based), else None."""
    if isinstance(item, Finding) or not item.evidence:
        return None
    return item.evidence[0][0]


def xml_text(text: str) -> str:
    """`text` with the characters XML 1.0 cannot represent replaced by U+FFFD."""
    return _NOT_XML.sub("\ufffd", text)
