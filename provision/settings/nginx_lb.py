"""The nginx_lb role's settings that the stack keeps (provision.nginx checks every other value)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from provision.settings import read


@dataclass(frozen=True)
class Balancer:
    enabled: bool = False
    listen: int = 8400
    bind: str = "127.0.0.1"


def parse(v: Mapping[str, Any]) -> Balancer:
    bind = read.address(v, "nginx_lb_bind")
    return Balancer(
        enabled=read.boolean(v, "nginx_lb_enabled"),
        listen=read.integer(v, "nginx_lb_listen", 1, 65535),
        bind=bind,
    )
