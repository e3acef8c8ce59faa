"""A probe: one POSIX shell command and the pure parser of what it prints.

The same command runs locally or on a remote host (through pyinfra), so a probe never reads the
local machine itself; `local` is an optional in-process fast path used only on this machine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from checks.facts.model import HostFacts


@dataclass(frozen=True)
class Probe:
    """`command` prints text that `parse` turns into a HostFacts fragment.

    `parse` receives stdout and stderr joined, and must never raise: what it cannot read it leaves
    unknown. `requires` names the binary whose absence makes the probe "absent", not "failed".
    """

    name: str
    command: str
    parse: Callable[[str], HostFacts]
    requires: str | None = None
    timeout: float = 10.0
    local: Callable[[], HostFacts] | None = None


class ProbeUnavailable(Exception):
    """Raised by a `local` fast path that cannot run here: the runner falls back to the command."""
