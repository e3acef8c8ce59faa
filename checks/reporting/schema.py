"""JSON Schema of the report and facts, derived from their dataclasses.

The committed checks/reporting/report.schema.json is this module's output; a test keeps them equal.
Regenerate with `python -m checks.reporting.schema > checks/reporting/report.schema.json`.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any

from checks.facts.model import FACTS_SCHEMA_VERSION, HostFacts
from checks.matrix.engine import SEVERITY_RANK, Finding
from checks.reporting.recommend import Recommendation
from checks.reporting.report import REPORT_SCHEMA_VERSION

_SCALARS = {str: "string", int: "integer", bool: "boolean", float: "number"}


def _type(hint: Any, defs: dict[str, Any]) -> dict[str, Any]:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return {"anyOf": [_type(inner[0], defs), {"type": "null"}]}
    if origin in (list, tuple):
        return {"type": "array", "items": _type(typing.get_args(hint)[0], defs)}
    if origin is dict:
        return {"type": "object"}
    if dataclasses.is_dataclass(hint):
        name = typing.cast(type, hint).__name__
        if name not in defs:
            defs[name] = {}
            defs[name] = _object(typing.cast(type, hint), defs)
        return {"$ref": f"#/$defs/{name}"}
    return {"type": _SCALARS[hint]}


def _object(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    return {
        "type": "object",
        "properties": {f.name: _type(hints[f.name], defs) for f in fields},
        "required": [f.name for f in fields],
        "additionalProperties": False,
    }


def report_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of `gpuprov check --json`."""
    defs: dict[str, Any] = {}
    facts = _type(HostFacts, defs)
    finding = _type(Finding, defs)
    defs["Finding"]["properties"]["severity"] = {"enum": list(SEVERITY_RANK)}
    defs["HostFacts"]["properties"]["schema_version"] = {"const": FACTS_SCHEMA_VERSION}
    recommendation = _type(Recommendation, defs)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://gpuprov.dev/schema/report-v1.json",
        "title": "gpuprov check report",
        "type": "object",
        "properties": {
            "schema_version": {"const": REPORT_SCHEMA_VERSION},
            "facts": facts,
            "findings": {"type": "array", "items": finding},
            "recommendations": {"type": "array", "items": recommendation},
        },
        "required": ["schema_version", "facts", "findings", "recommendations"],
        "additionalProperties": False,
        "$defs": dict(sorted(defs.items())),
    }


def facts_schema() -> dict[str, Any]:
    """The JSON Schema of `gpuprov facts --json` (and of a facts file given to --from)."""
    schema = report_schema()
    return {
        "$schema": schema["$schema"],
        "$id": "https://gpuprov.dev/schema/facts-v1.json",
        "title": "gpuprov host facts",
        "$ref": "#/$defs/HostFacts",
        "$defs": schema["$defs"],
    }


if __name__ == "__main__":
    print(json.dumps(report_schema(), indent=2))
