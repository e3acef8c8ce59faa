"""What each command prints: one model per command, emitted as versioned JSON or its text view.

The JSON schemas are in checks/reporting/schemas/; the text views in provision/render.py, loaded
only for text output so `--json` stays light.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from checks.facts.model import HostFacts, to_dict
from checks.matrix.registry import RULES_SCHEMA_VERSION

if TYPE_CHECKING:
    from checks.logs.logsource import Result
    from checks.matrix.registry import Rule

# How much of one value the text view shows; --json keeps every value whole.
MAX_SHOWN = 2000
# C0 and C1 controls, DEL, and the Unicode line separators and direction overrides: what a
# terminal would act on (colours, cursor moves, titles, reordered text) rather than show.
_CONTROLS = r"\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(f"[{_CONTROLS}]")
_CONTROL_OR_NEWLINE = re.compile(rf"[{_CONTROLS}\n]")


def printable(text: str, limit: int | None = MAX_SHOWN, lines: bool = False) -> str:
    """Text that came from input, safe to print: every control character, and so every escape
    sequence, shows as its escape (ESC as \\x1b), newlines too unless `lines`; text past `limit`
    characters is cut, saying how much was."""
    cut = ""
    if limit is not None and len(text) > limit:
        cut = f" ... ({len(text) - limit} more characters not shown)"
        text = text[:limit]
    pattern = _CONTROL if lines else _CONTROL_OR_NEWLINE
    return pattern.sub(_visible, text) + cut


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


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
