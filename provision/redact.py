"""Drop what identifies a machine from facts before they are shared: serials, UUIDs, hostnames.

A hostname is masked wherever it appears, free text included. The hostnames are the values of
`hostname` fields and the hosts that `sources` name (model.probed_hosts).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, TypeVar

from checks.facts.model import probed_hosts
from checks.reporting.fleet import FleetReport

REDACTED = "<redacted>"
_KEYS = {"serial", "uuid", "hostname"}
_UUID = re.compile(
    r"\b(GPU|MIG)-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
)

T = TypeVar("T")


def redact(data: T, aliases: dict[str, str] | None = None) -> T:
    """A copy of `data` (JSON-like, or dataclasses such as HostFacts and Report) with identifying
    fields blanked, and hostnames and GPU/MIG UUIDs masked in every string; each name in
    `aliases` (other machines' names) is replaced by its alias wherever it appears."""
    names = {name: REDACTED for name in _hostnames(data) - {"", REDACTED}}
    names.update({k: v for k, v in (aliases or {}).items() if k})
    ordered = sorted(names, key=len, reverse=True)
    hosts = (
        re.compile(rf"(?<![\w.-])(?:{'|'.join(map(re.escape, ordered))})(?![\w-])")
        if ordered
        else None
    )
    masked: T = _masked(data, hosts, names)
    return masked


def _fields(value: Any) -> dict[str, Any] | None:
    """A dict's items, or a dataclass instance's fields by name; None for anything else."""
    if isinstance(value, dict):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.init}
    return None


def _hostnames(value: Any) -> set[str]:
    """The values of `hostname` fields and the hosts `sources` name, anywhere in `value`."""
    if isinstance(value, (list, tuple)):
        return set().union(*(_hostnames(v) for v in value))
    fields = _fields(value)
    if fields is None:
        return set()
    found: set[str] = set()
    for key, child in fields.items():
        if key == "hostname" and isinstance(child, str):
            found.add(child)
        elif key == "sources" and isinstance(child, list):
            found |= probed_hosts(s for s in child if isinstance(s, str))
        found |= _hostnames(child)
    return found


def _masked(value: Any, hosts: re.Pattern[str] | None, names: dict[str, str]) -> Any:
    """`value` with identifying fields blanked, UUIDs masked and each of `hosts` replaced by
    what `names` gives it in its strings."""
    if isinstance(value, str):
        text = _UUID.sub(lambda m: f"{m.group(1)}-{REDACTED}", value)
        return hosts.sub(lambda m: names[m.group(0)], text) if hosts is not None else text
    if type(value) in (list, tuple):
        return type(value)(_masked(v, hosts, names) for v in value)
    fields = _fields(value)
    if fields is None:
        return value
    masked = {
        k: REDACTED if k in _KEYS and v is not None else _masked(v, hosts, names)
        for k, v in fields.items()
    }
    return masked if isinstance(value, dict) else dataclasses.replace(value, **masked)


def anonymised(r: FleetReport) -> FleetReport:
    """The report with hosts renamed host1, host2, ... (inventory order) and every identifying
    value redacted, so a fleet can be shared and its hosts still told apart."""
    names = {h.name: f"host{i}" for i, h in enumerate(r.hosts, 1)}
    # Every machine's names, masked in every host's text: one host's error may name another.
    aliases = {name: REDACTED for name in _hostnames(r.hosts) - {"", REDACTED}} | names
    hosts = [dataclasses.replace(redact(h, aliases), name=names[h.name]) for h in r.hosts]
    shared = [dataclasses.replace(s, hosts=[names[n] for n in s.hosts]) for s in r.shared]
    inventory = redact(r.inventory, aliases)
    return dataclasses.replace(r, inventory=inventory, hosts=hosts, shared=shared)
