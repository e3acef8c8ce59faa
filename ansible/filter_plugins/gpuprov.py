"""gpuprov's Jinja filters for Ansible: the same registry pyinfra renders the templates with."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from provision.filters import registry


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return dict(registry())
