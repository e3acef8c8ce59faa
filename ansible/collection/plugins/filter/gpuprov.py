"""gpuprov's Jinja filters in the gpuprov.inference collection.

The quoting filters come with the collection (plugin_utils/quoting.py, a copy of gpuprov's
provision/quoting.py made when the collection is built). The others check role settings with
gpuprov's own code (the stack model, llama-server's --help), so they need gpuprov on the
controller, `pip install gpuprov`; without it they fail saying so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.gpuprov.inference.plugins.plugin_utils import quoting

# Every filter of gpuprov's registry (provision.filters) but the quoting ones.
NEED_GPUPROV = (
    "llama_server_args",
    "llama_server_binary_command",
    "llama_server_env",
    "llama_server_listen",
    "llama_server_refused",
    "nginx_host",
    "nginx_number",
    "nginx_servers",
    "nginx_size",
    "nvidia_container_toolkit_key_command",
    "nvidia_container_toolkit_source_command",
    "vllm_command",
    "vllm_env",
)


def missing(name: str, why: str) -> Callable[..., Any]:
    """A filter that refuses to run, naming what the controller lacks."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AnsibleFilterError(
            f"the filter {name} needs gpuprov on the controller: pip install gpuprov ({why})"
        )

    return refuse


def gpuprov_filters() -> dict[str, Callable[..., Any]]:
    """NEED_GPUPROV from gpuprov when it can be imported, else filters that say it is missing."""
    try:
        from provision.filters import registry
    except ImportError as e:
        return {name: missing(name, f"cannot import it: {e}") for name in NEED_GPUPROV}
    found = registry()
    return {
        name: found.get(name) or missing(name, "this gpuprov has no such filter")
        for name in NEED_GPUPROV
    }


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {**gpuprov_filters(), **quoting.FILTERS}
