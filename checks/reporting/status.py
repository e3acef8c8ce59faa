"""`gpuprov status` and `gpuprov logs`: the services gpuprov manages on each host, as they run."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from checks.logs.explain import Diagnosis

STATUS_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class ServiceStatus:
    """One managed unit: its state and since when, restarts, the canary's last word, what it
    runs, the GPU memory it holds against the plan, and how it differs from the inventory."""

    service: str
    unit: str
    kind: str  # llama, vllm, balancer, canary
    state: str  # systemd's ActiveState (SubState), "idle (on demand)", or "not installed"
    since: str | None
    restarts: int | None  # since the unit was last started by hand or by apply (NRestarts)
    restarts_last_hour: int | None
    canary: str | None  # the canary's last line about it, with its time
    runs: str | None  # the llama.cpp build, or the container's image
    vram_used_mib: int | None  # what its processes hold now (nvidia-smi)
    vram_planned_mib: float | None  # what the budget counts for it
    drift: list[str]  # what apply would change for it, or why it is not as planned


@dataclass(frozen=True)
class HostStatus:
    name: str
    error: str | None  # why the host could not be read
    services: list[ServiceStatus]
    stale: list[str]  # gpuprov units the inventory no longer names (apply removes them)
    build_current: str | None
    build_planned: str | None
    builds: list[str]


@dataclass(frozen=True)
class StatusReport:
    inventory: str
    hosts: list[HostStatus]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": STATUS_SCHEMA_VERSION,
            "inventory": self.inventory,
            "hosts": [dataclasses.asdict(h) for h in self.hosts],
        }

    def healthy(self) -> bool:
        """Every host read, every service active and as planned, nothing stale."""
        return all(
            h.error is None
            and not h.stale
            and all(
                (s.state.startswith("active") or s.state.startswith("idle")) and not s.drift
                for s in h.services
            )
            for h in self.hosts
        )


LOGS_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class ServiceLog:
    """One host's journal of a service, secrets masked, and what explain finds in it."""

    host: str
    unit: str
    error: str | None  # why it could not be read
    lines: list[str]
    diagnoses: list[Diagnosis] | None  # None without --explain


@dataclass(frozen=True)
class LogsReport:
    inventory: str
    service: str
    logs: list[ServiceLog]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": LOGS_SCHEMA_VERSION,
            "inventory": self.inventory,
            "service": self.service,
            "logs": [dataclasses.asdict(log) for log in self.logs],
        }
