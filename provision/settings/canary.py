"""The canary role's settings: how often it probes the servers, and when it restarts one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from provision.settings import read


@dataclass(frozen=True)
class Canary:
    enabled: bool = True
    interval: int = 30
    timeout: int = 20
    failures: int = 2
    cool_down: int = 300


def parse(v: Mapping[str, Any]) -> Canary:
    return Canary(
        enabled=read.boolean(v, "canary_enabled"),
        interval=read.integer(v, "canary_interval", 5, 86400),
        timeout=read.integer(v, "canary_timeout", 1, 600),
        failures=read.integer(v, "canary_failures", 1, 100),
        cool_down=read.integer(v, "canary_cool_down", 0, 86400),
    )
