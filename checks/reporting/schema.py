"""JSON Schemas of every `--json` output, derived from the dataclasses each one writes.

The committed checks/reporting/schemas/<kind>.schema.json are this module's output (a test keeps
them equal): `python -m checks.reporting.schema --write` regenerates them, `... KIND` prints one.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from checks import packaged
from checks.facts.model import FACTS_SCHEMA_VERSION, HostFacts
from checks.logs.explain import Diagnosis
from checks.logs.logsource import EXPLAIN_SCHEMA_VERSION, Result
from checks.matrix.engine import SEVERITY_RANK, Finding
from checks.matrix.registry import RULES_SCHEMA_VERSION
from checks.reporting.fleet import FLEET_SCHEMA_VERSION, FleetHost, SharedFinding
from checks.reporting.recommend import Recommendation
from checks.reporting.report import REPORT_SCHEMA_VERSION, ImageVerdict
from checks.reporting.status import (
    LOGS_SCHEMA_VERSION,
    STATUS_SCHEMA_VERSION,
    HostStatus,
    ServiceLog,
)

# plan/apply JSON is built in provision/converge_cli.py, which cannot be imported from here.
CONVERGE_SCHEMA_VERSION = 2
# fit JSON is built in provision/fit_cli.py (Fit.to_json), for the same reason.
FIT_SCHEMA_VERSION = 2

DRAFT = "https://json-schema.org/draft/2020-12/schema"
_SCALARS = {str: "string", int: "integer", bool: "boolean", float: "number"}
_STRING = {"type": "string"}
_STRINGS = {"type": "array", "items": _STRING}
# What deploy records for each operation: planned ("will change", "unchanged") or run.
OPERATION_STATUSES = ("will change", "unchanged", "changed", "failed", "not run")


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


def _closed(properties: dict[str, Any]) -> dict[str, Any]:
    """An object with exactly these keys."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _type(hint: Any, defs: dict[str, Any]) -> dict[str, Any]:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _nullable(_type(inner[0], defs))
    if origin is tuple and args[-1] is not Ellipsis:  # a fixed pair such as (line, text)
        return {
            "type": "array",
            "prefixItems": [_type(a, defs) for a in args],
            "items": False,
            "minItems": len(args),
        }
    if origin in (list, tuple):
        return {"type": "array", "items": _type(args[0], defs)}
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
    properties = {f.name: _type(hints[f.name], defs) for f in dataclasses.fields(cls)}
    if "severity" in properties:
        properties["severity"] = {"enum": list(SEVERITY_RANK)}
    if cls is HostFacts:
        properties["schema_version"] = {"const": FACTS_SCHEMA_VERSION}
    return _closed(properties)


def _document(
    kind: str, title: str, version: int, properties: dict[str, Any], defs: dict[str, Any]
) -> dict[str, Any]:
    """A top-level object that starts with `schema_version`."""
    return {
        "$schema": DRAFT,
        "$id": f"https://gpuprov.dev/schema/{kind}-v{version}.json",
        "title": title,
        **_closed({"schema_version": {"const": version}, **properties}),
        "$defs": dict(sorted(defs.items())),
    }


def report_schema() -> dict[str, Any]:
    """`gpuprov check --json`."""
    defs: dict[str, Any] = {}
    properties = {
        "facts": _type(HostFacts, defs),
        "findings": _type(list[Finding], defs),
        "recommendations": _type(list[Recommendation], defs),
        "images": _type(list[ImageVerdict], defs),
    }
    return _document("report", "gpuprov check report", REPORT_SCHEMA_VERSION, properties, defs)


def facts_schema() -> dict[str, Any]:
    """`gpuprov facts --json`, and a facts file given to --from: HostFacts itself."""
    defs: dict[str, Any] = {}
    top = _type(HostFacts, defs)
    return {
        "$schema": DRAFT,
        "$id": f"https://gpuprov.dev/schema/facts-v{FACTS_SCHEMA_VERSION}.json",
        "title": "gpuprov host facts",
        **top,
        "$defs": dict(sorted(defs.items())),
    }


def explain_schema() -> dict[str, Any]:
    """`gpuprov explain --json`: each log read, with its diagnoses."""
    defs: dict[str, Any] = {}
    _type(Diagnosis, defs)
    properties = {"logs": _type(list[Result], defs)}
    return _document(
        "explain", "gpuprov explain diagnoses", EXPLAIN_SCHEMA_VERSION, properties, defs
    )


def rules_schema() -> dict[str, Any]:
    """`gpuprov rules --json` and `gpuprov rules ID --json` (a list of one)."""
    rule = _closed(
        {
            "id": _STRING,
            "title": _STRING,
            "severity": {"enum": list(SEVERITY_RANK)},
            "area": _STRING,
            "why": _STRING,
            "symptoms": _STRINGS,
            "fix": _STRING,
            "citations": _STRINGS,
            "detected_by": _STRINGS,
            "fixed_by": _nullable(_STRING),
        }
    )
    properties = {"rules": {"type": "array", "items": {"$ref": "#/$defs/Rule"}}}
    return _document("rules", "gpuprov rules", RULES_SCHEMA_VERSION, properties, {"Rule": rule})


def _verification(defs: dict[str, Any]) -> dict[str, Any]:
    """`apply`'s post-apply check of one host: each unit, and a failed one's journal and causes."""
    unit = _closed(
        {
            "unit": _STRING,
            "ok": {"type": "boolean"},
            "state": _STRING,
            "detail": _STRING,
            "restarts": {"type": "integer"},
            "journal": _STRINGS,
            "diagnoses": _type(list[Diagnosis], defs),
        }
    )
    return _closed(
        {
            "ok": {"type": "boolean"},
            "settle_seconds": {"type": "number"},
            "error": _nullable(_STRING),
            "notes": _STRINGS,
            "units": {"type": "array", "items": unit},
        }
    )


def converge_schema() -> dict[str, Any]:
    """`gpuprov plan --json` and `gpuprov apply --json`: each host's gate, build and operations."""
    defs: dict[str, Any] = {}
    _type(Finding, defs)
    planned = dict(defs.pop("Finding"))
    planned["properties"] = {
        **planned["properties"],
        "blocks": {"type": "boolean"},
        "blocks_why": _nullable(_STRING),
    }
    planned["required"] = [*planned["required"], "blocks", "blocks_why"]
    defs["GateFinding"] = planned
    host = _closed(
        {
            "skipped": _nullable(_STRING),
            "findings": {"type": "array", "items": {"$ref": "#/$defs/GateFinding"}},
            "problems": _STRINGS,
            "build": _nullable(_closed({"name": _STRING, "cuda_architectures": _STRINGS})),
            "image": _nullable(
                _closed({"ref": _STRING, "present": {"type": "boolean"}, "detail": _STRING})
            ),
            "vram": _nullable(
                _closed({"fits": {"type": "boolean"}, "problems": _STRINGS, "table": _STRINGS})
            ),
            "operations": {
                "type": "array",
                "items": _closed({"name": _STRING, "status": {"enum": list(OPERATION_STATUSES)}}),
            },
            "changed": {"type": "integer"},
            "failed": {"type": "boolean"},
            # a unified diff of the balancer config nginx serves, when the run changes it
            "balancer_diff": _nullable(_STRING),
            "verification": _nullable(_verification(defs)),
        }
    )
    defs["Host"] = host
    properties = {
        "inventory": _STRING,
        "applied": {"type": "boolean"},
        "hosts": {"type": "object", "additionalProperties": {"$ref": "#/$defs/Host"}},
    }
    return _document("converge", "gpuprov plan or apply", CONVERGE_SCHEMA_VERSION, properties, defs)


def fit_schema() -> dict[str, Any]:
    """`gpuprov fit --json`: one llama-server's estimate per GPU (with its projector's and draft
    model's parts), the GPUs, the verdict."""
    number, integer = {"type": "number"}, {"type": "integer"}
    part = _closed(
        {
            "weights_mib": number,
            "kv_mib": number,
            "compute_mib": number,
            "total_mib": number,
            "how": _STRING,
            "not_counted": _nullable(_STRING),
        }
    )
    properties = {
        "model": _closed(
            {
                "path": _STRING,
                "architecture": _nullable(_STRING),
                "block_count": _nullable(integer),
                "context_length": _nullable(integer),
            }
        ),
        "settings": _closed(
            {
                "ctx": integer,
                "parallel": integer,
                "kv_unified": {"type": "boolean"},
                "cache_type_k": _STRING,
                "cache_type_v": _STRING,
                "flash_attn": _STRING,
                "ubatch": integer,
                "n_gpu_layers": _STRING,
                "n_cpu_moe": {"anyOf": [{"type": "integer", "minimum": 0}, {"const": "all"}]},
                "mmproj": _nullable(_STRING),
                "mmproj_offload": {"type": "boolean"},
                "model_draft": _nullable(_STRING),
                "draft_n_gpu_layers": _STRING,
                "draft_cache_type_k": _STRING,
                "draft_cache_type_v": _STRING,
            }
        ),
        "per_gpu": _closed(
            {
                "weights_mib": number,
                "kv_mib": number,
                "kv_layers": integer,
                "swa_layers": integer,
                "cells": integer,
                "recurrent_mib": number,
                "recurrent_layers": integer,
                "compute_mib": number,
                "cuda_context_mib": number,
                "total_mib": number,
                "offloaded_layers": _nullable(_STRING),
                "notes": _STRINGS,
                "mmproj": _nullable(part),
                "draft": _nullable(part),
            }
        ),
        "gpus_from": _STRING,
        "gpus": {
            "type": "array",
            "items": _closed(
                {
                    "index": integer,
                    "name": _STRING,
                    "total_mib": _nullable(integer),
                    "held_mib": number,
                    "free_mib": _nullable(number),
                }
            ),
        },
        "fits": _nullable({"type": "boolean"}),
        "problems": _STRINGS,
        "largest_ctx": _nullable(integer),
        "search_limit": integer,
    }
    return _document("fit", "gpuprov fit estimate", FIT_SCHEMA_VERSION, properties, {})


def bench_schema() -> dict[str, Any]:
    """`gpuprov bench --json`: the load, each concurrency level, the knee, the verdict. Derived
    from provision/bench.py's dataclasses (that module imports only the standard library)."""
    from provision.bench import BENCH_SCHEMA_VERSION, Bench

    defs: dict[str, Any] = {}
    properties = _object(Bench, defs)["properties"]
    return _document("bench", "gpuprov bench", BENCH_SCHEMA_VERSION, properties, defs)


def fleet_schema() -> dict[str, Any]:
    """`gpuprov check INVENTORY --json`: each host's report (or why it was not checked), and
    which hosts share which finding."""
    defs: dict[str, Any] = {}
    properties = {
        "inventory": _STRING,
        "hosts": _type(list[FleetHost], defs),
        "shared": _type(list[SharedFinding], defs),
    }
    return _document(
        "fleet", "gpuprov check of an inventory", FLEET_SCHEMA_VERSION, properties, defs
    )


def status_schema() -> dict[str, Any]:
    """`gpuprov status INVENTORY --json`: each host's managed services as they run."""
    defs: dict[str, Any] = {}
    properties = {"inventory": _STRING, "hosts": _type(list[HostStatus], defs)}
    return _document("status", "gpuprov status", STATUS_SCHEMA_VERSION, properties, defs)


def logs_schema() -> dict[str, Any]:
    """`gpuprov logs INVENTORY SERVICE --json`: each host's journal of the service."""
    defs: dict[str, Any] = {}
    properties = {
        "inventory": _STRING,
        "service": _STRING,
        "logs": _type(list[ServiceLog], defs),
    }
    return _document("logs", "gpuprov logs", LOGS_SCHEMA_VERSION, properties, defs)


SCHEMAS: dict[str, Callable[[], dict[str, Any]]] = {
    "logs": logs_schema,
    "report": report_schema,
    "fleet": fleet_schema,
    "status": status_schema,
    "facts": facts_schema,
    "explain": explain_schema,
    "rules": rules_schema,
    "converge": converge_schema,
    "fit": fit_schema,
    "bench": bench_schema,
}


def path(kind: str) -> Path:
    """checks/reporting/schemas/<kind>.schema.json, `kind` a key of SCHEMAS."""
    return packaged.path("checks.reporting", "schemas") / f"{kind}.schema.json"


def committed(kind: str) -> dict[str, Any]:
    return typing.cast(dict[str, Any], json.loads(path(kind).read_text(encoding="utf-8")))


def dumps(kind: str) -> str:
    return json.dumps(SCHEMAS[kind](), indent=2) + "\n"


def main(argv: list[str]) -> int:
    if argv == ["--write"]:
        for kind in SCHEMAS:
            path(kind).write_text(dumps(kind), encoding="utf-8")
        return 0
    if len(argv) == 1 and argv[0] in SCHEMAS:
        sys.stdout.write(dumps(argv[0]))
        return 0
    kinds = " | ".join(SCHEMAS)
    print(f"usage: python -m checks.reporting.schema --write | {kinds}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
