"""Drop what identifies a machine from facts before they are shared: serials, UUIDs, hostnames."""

from __future__ import annotations

import re
from typing import Any

REDACTED = "<redacted>"
_KEYS = {"serial", "uuid", "hostname"}
_UUID = re.compile(
    r"\b(GPU|MIG)-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
)


def redact(data: Any) -> Any:
    """A copy of JSON-like `data` with identifying keys blanked and GPU/MIG UUIDs masked."""
    if isinstance(data, dict):
        return {
            k: (REDACTED if k in _KEYS and v is not None else redact(v)) for k, v in data.items()
        }
    if isinstance(data, list):
        return [redact(v) for v in data]
    if isinstance(data, str):
        return _UUID.sub(lambda m: f"{m.group(1)}-{REDACTED}", data)
    return data
