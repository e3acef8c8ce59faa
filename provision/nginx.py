"""The nginx balancer's config: its backends, and every value checked before it reaches nginx.

Shared by both engines: pyinfra renders roles/nginx_lb's template through `render`, Ansible has
`FILTERS` from provision.filters and computes the backends in tasks/backends.yml the way
`backends` does. A value is written only as a word nginx reads literally (an address, a number, a
size: no spaces, quotes, `;`, braces, `$` or `#`), so none needs quoting; anything else is refused
with StackError naming the variable.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from typing import Any

from provision import templates
from provision.stack import StackError

TEMPLATE = "nginx_lb/templates/gpuprov-lb.conf.j2"
WILDCARDS = ("0.0.0.0", "::")
HOSTNAME = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)
NUMBER = re.compile(r"^[0-9]{1,10}$")
PATH = re.compile(r"^(/[A-Za-z0-9._+@-]+)+$")
SIZE = re.compile(r"^[0-9]{1,12}[kKmMgG]?$")


def host(value: object, field: str) -> str:
    """An IP address (IPv6 in brackets) or a host name, as `listen` and `server` take it."""
    text = value if isinstance(value, str) and "%" not in value else ""  # no IPv6 scope
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        if ":" in text or not HOSTNAME.match(text) or text.replace(".", "").isdigit():
            raise StackError(field, f"an IP address or a host name, got {value!r}") from None
        return text
    return f"[{address.compressed}]" if address.version == 6 else address.compressed


def number(value: object, field: str, low: int, high: int) -> str:
    """A whole number from `low` to `high` (digits only, so a digit string from Ansible passes)."""
    text = str(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
    if not NUMBER.match(text) or not low <= int(text) <= high:
        raise StackError(field, f"a whole number {low}-{high}, got {value!r}")
    return str(int(text))


def size(value: object, field: str) -> str:
    """A size as nginx writes it: bytes, or a number with k, m or g (64m)."""
    text = str(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
    if not SIZE.match(text):
        raise StackError(field, f"a size like 64m (digits, then k, m or g), got {value!r}")
    return text


def server(value: object, field: str) -> str:
    """An upstream server as HOST:PORT ([IPv6]:PORT), written in its canonical form."""
    text = value if isinstance(value, str) and "%" not in value else ""  # no IPv6 scope
    m = re.match(r"^(\[[^]]*\]|[^:]*):([^:]*)$", text)
    if m is None:
        raise StackError(field, f"HOST:PORT (an IPv6 address in brackets), got {value!r}")
    name, port = m.groups()
    if name.startswith("["):
        try:
            address = ipaddress.IPv6Address(name[1:-1])
        except ValueError:
            raise StackError(field, f"not an IPv6 address in {value!r}") from None
        name = f"[{address.compressed}]"
    else:
        name = host(name, field)
    return f"{name}:{number(port, field, 1, 65535)}"


def path(value: object, field: str) -> str:
    """An absolute file path of plain characters (letters, digits, ._+@-), without `..`."""
    text = value if isinstance(value, str) else ""
    if not PATH.match(text) or ".." in text.split("/"):
        raise StackError(field, f"an absolute file path (letters, digits, ._+@-), got {value!r}")
    return text


def servers(entries: Sequence[object], source: str) -> list[str]:
    """Every backend checked by `server`; errors name `source`[index]."""
    if not entries:
        raise StackError("nginx_lb_servers", "empty, and the host has no vllm_replicas to balance")
    return [server(entry, f"{source}[{i}]") for i, entry in enumerate(entries)]


def backends(variables: Mapping[str, Any]) -> list[str]:
    """The upstream's servers: nginx_lb_servers if set, else every vLLM replica of the host.

    A replica's host defaults to vllm_defaults.host; one listening on every address (0.0.0.0,
    ::) is reached on 127.0.0.1. Entries are checked when the config is rendered (`servers`).
    """
    listed = variables.get("nginx_lb_servers") or []
    if listed:
        return [str(entry) for entry in listed]
    default = (variables.get("vllm_defaults") or {}).get("host", "127.0.0.1")
    found = []
    for i, replica in enumerate(variables.get("vllm_replicas") or []):
        if not isinstance(replica, Mapping):
            raise StackError(f"vllm_replicas[{i}]", "must be a mapping")
        address = str(replica.get("host", default))
        address = "127.0.0.1" if address in WILDCARDS else address
        address = f"[{address}]" if ":" in address else address
        found.append(f"{address}:{replica.get('port', '')}")
    return found


FILTERS = {
    "nginx_host": host,
    "nginx_number": number,
    "nginx_size": size,
    "nginx_servers": servers,
}


def render(variables: Mapping[str, Any]) -> str:
    """The balancer's conf.d file for a host's variables; StackError names a bad value."""
    template = templates.environment().get_template(TEMPLATE)
    return template.render(**variables, gpuprov_lb_backends=backends(variables))
