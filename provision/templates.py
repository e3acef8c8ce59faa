"""Render the roles' Jinja templates the way Ansible's template module does.

Same environment settings as Ansible's (trim_blocks, trailing newline kept) and the same filters
(provision.filters), so both engines write byte-identical files from one template.
"""

from __future__ import annotations

import functools
from typing import Any

import jinja2

from checks import packaged
from provision import filters


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(packaged.path("provision.roles"))),
        trim_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )
    env.filters.update(filters.registry())
    return env


def render(role: str, name: str, **variables: Any) -> str:
    """Render roles/<role>/templates/<name>."""
    return environment().get_template(f"{role}/templates/{name}").render(**variables)
