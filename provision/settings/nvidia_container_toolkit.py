"""The nvidia_container_toolkit role's settings: whether to install it, and its GPU mode."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from provision.settings import read

MODES = ("docker", "cdi")


@dataclass(frozen=True)
class Toolkit:
    install: bool = True
    mode: str = "docker"


def parse(v: Mapping[str, Any]) -> Toolkit:
    return Toolkit(
        install=read.boolean(v, "nvidia_container_toolkit_install"),
        mode=read.choice(v, "nvidia_container_toolkit_mode", MODES),
    )
