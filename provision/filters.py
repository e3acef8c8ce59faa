"""Every Jinja filter of the roles' templates and Ansible tasks, for both engines.

Each module names its own filters in its FILTERS; provision.templates renders with all of them,
and Ansible loads the same through ansible/filter_plugins/gpuprov.py.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from provision import nginx, quoting, servicefacts, toolkit, vllm
from provision.settings import llama_server

MODULES = (quoting, vllm, nginx, toolkit, llama_server, servicefacts)


@functools.cache
def registry() -> Mapping[str, Callable[..., Any]]:
    """Every filter by name; a name two modules define is an error."""
    found: dict[str, Callable[..., Any]] = {}
    for module in MODULES:
        for name, function in module.FILTERS.items():
            if name in found:
                raise ValueError(f"filter {name!r} is defined twice ({module.__name__})")
            found[name] = function
    return found
