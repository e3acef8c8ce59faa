"""Residency, one reading for llama.cpp profiles and vLLM replicas: resident (always running) or
on demand (a systemd socket owns the public port and starts the server on the first connection;
it stops after idle_seconds without one). A swap group's members are on demand, and at most one
of them runs. An on-demand server listens on a loopback backend_port behind the socket."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from provision.settings import read
from provision.settings.read import StackError

RESIDENCY = ("resident", "on_demand")
BACKEND_OFFSET = 10000  # an on-demand server listens on port + this, unless backend_port is set
IDLE_SECONDS = 600
MAX_IDLE = 7 * 86400


@dataclass(frozen=True)
class Residency:
    """The four residency settings of one server, as its dataclass holds them."""

    residency: str = "resident"
    idle_seconds: int = IDLE_SECONDS
    swap_group: str = ""
    backend_port: int = 0  # where an on-demand server listens (loopback), behind the socket

    def fields(self) -> dict[str, Any]:
        return {
            "residency": self.residency,
            "idle_seconds": self.idle_seconds,
            "swap_group": self.swap_group,
            "backend_port": self.backend_port,
        }


class Server(Protocol):
    """A profile or a replica: what the port checks read of it."""

    @property
    def name(self) -> str: ...

    @property
    def port(self) -> int: ...

    @property
    def on_demand(self) -> bool: ...

    @property
    def backend_port(self) -> int: ...

    @property
    def swap_group(self) -> str: ...


def parse(v: Mapping[str, Any], where: str, port: int) -> Residency:
    """An entry's residency settings; `port` is its public port (the backend's default base)."""
    group = read.name(v, "swap_group", where) if v.get("swap_group") else ""
    residency = str(v.get("residency") or "resident")
    if residency not in RESIDENCY:
        raise StackError(f"{where}.residency", f"one of {', '.join(RESIDENCY)}, got {residency!r}")
    if group:
        residency = "on_demand"  # a swap group's members run on demand, one at a time
    backend = 0
    if residency == "on_demand":
        backend = (
            read.integer(v, "backend_port", 1, 65535, where)
            if v.get("backend_port")
            else port + BACKEND_OFFSET
        )
        if backend > 65535:
            raise StackError(
                f"{where}.backend_port", f"port {port} + {BACKEND_OFFSET} is past 65535: set it"
            )
    idle = (
        read.integer(v, "idle_seconds", 1, MAX_IDLE, where) if "idle_seconds" in v else IDLE_SECONDS
    )
    return Residency(residency, idle, group, backend)


def check_ports(found: Sequence[Server], key: str, noun: str) -> None:
    """An on-demand entry's backend port is no entry's port nor an earlier one's backend, and no
    entry is named like another's proxy unit (<name>-proxy). `key` names the list."""
    ports = {s.port for s in found}
    for i, s in enumerate(found):
        if not s.on_demand:
            continue
        earlier = {t.backend_port for t in found[:i] if t.on_demand}
        if s.backend_port in ports or s.backend_port in earlier:
            raise StackError(
                f"{key}[{i}].backend_port",
                f"{s.backend_port} is another {noun}'s port: set backend_port to a free one",
            )
        for j, t in enumerate(found):
            if t.name == f"{s.name}-proxy":
                raise StackError(
                    f"{key}[{j}].name", f"{t.name!r} is the name of {s.name}'s proxy unit"
                )


def swap_peers(server: Server, servers: Sequence[Server]) -> list[str]:
    """The other members of `server`'s swap group, in inventory order (Conflicts= in its unit)."""
    group = server.swap_group
    return [s.name for s in servers if group and s.swap_group == group and s.name != server.name]


def listen(entry: Mapping[str, Any]) -> tuple[str, int]:
    """Where the server itself listens: the entry's host and port, or for an on-demand entry
    (an asdict() form or Ansible's merged dict) the loopback backend port behind the socket."""
    if entry.get("residency") == "on_demand" or entry.get("swap_group"):
        backend = int(entry.get("backend_port") or 0) or int(entry["port"]) + BACKEND_OFFSET
        return "127.0.0.1", backend
    return str(entry["host"]), int(entry["port"])


def public_url(host: str, port: int) -> str:
    """The URL clients use (an on-demand server's socket): a wildcard host on loopback."""
    local = "127.0.0.1" if host in ("0.0.0.0", "::", "") else f"[{host}]" if ":" in host else host
    return f"http://{local}:{port}"
