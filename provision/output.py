"""What each command prints: one model per command, emitted as versioned JSON or its text view.

The JSON schemas are in checks/reporting/schemas/; the text views in provision/render.py, loaded
only for text output so `--json` stays light.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from checks.facts.model import HostFacts, to_dict
from checks.matrix.registry import RULES_SCHEMA_VERSION

if TYPE_CHECKING:
    from checks.logs.logsource import Result
    from checks.matrix.registry import Rule


class Model(Protocol):
    """What a command prints: its JSON (schema in checks/reporting/schemas/), or render.view."""

    def to_json(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Facts:
    """`gpuprov facts`: one host's facts (HostFacts carries their schema_version)."""

    host: HostFacts

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = to_dict(self.host)
        return data


@dataclass(frozen=True)
class Rules:
    """`gpuprov rules`: every rule, or the one asked for by ID (shown with its docs)."""

    rules: tuple[Rule, ...]
    one: bool = False

    def to_json(self) -> dict[str, Any]:
        from provision import render

        return {
            "schema_version": RULES_SCHEMA_VERSION,
            "rules": [render.rule_json(r) for r in self.rules],
        }


@dataclass(frozen=True)
class Explanation:
    """`gpuprov explain`: each log read, with its diagnoses."""

    results: list[Result]

    def to_json(self) -> dict[str, Any]:
        from checks.logs import logsource

        return logsource.to_json(self.results)


def emit(model: Model, as_json: bool, redacted: bool = False) -> None:
    """Print a command's result on stdout: its versioned JSON, or its text view."""
    if not as_json:
        from provision import render

        render.view(model, redacted)
        return
    data = model.to_json()
    if redacted:
        from provision.redact import redact

        data = redact(data)
    print(json.dumps(data, indent=2))
