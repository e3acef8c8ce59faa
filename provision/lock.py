"""A per-host apply lock, held on the host itself so applies from any machine serialise.

`mkdir` is atomic; the lock lives under /run, so a reboot clears a lock left by a crash.
"""

from __future__ import annotations

import getpass
import os
import socket
import time
import uuid
from collections.abc import Callable

from pyinfra.api.command import QuoteString, StringCommand
from pyinfra.api.host import Host

from provision import host_shell

PATH = "/run/gpuprov/apply.lock"
POLL = 2.0


def token() -> str:
    """Who holds the lock: user@machine, pid, start time, and a unique id."""
    started = time.strftime("%Y-%m-%dT%H:%M:%S")
    who = f"{getpass.getuser()}@{socket.gethostname()}"
    return f"{who} pid {os.getpid()} since {started} {uuid.uuid4().hex[:8]}"


def _run(host: Host, script: str, *args: str) -> tuple[bool, str]:
    command = StringCommand(
        "sh", "-c", QuoteString(script), "gpuprov-lock", *map(QuoteString, args)
    )
    ok, output = host_shell.run(host, command)
    return ok, "\n".join(output.stdout_lines).strip()  # sudo may warn on stderr


TRY = (
    'mkdir -p "${1%/*}" && mkdir "$1" 2>/dev/null && printf "%s\\n" "$2" > "$1/owner"'
    ' || { cat "$1/owner" 2>/dev/null; exit 1; }'
)
RELEASE = '[ "$(cat "$1/owner" 2>/dev/null)" = "$2" ] && rm -rf "$1"'


def acquire(
    host: Host, owner: str, timeout: float, progress: Callable[[str], None]
) -> tuple[bool, str]:
    """Wait up to `timeout` seconds for the lock; (False, why) when another apply keeps it."""
    deadline = time.monotonic() + timeout
    told = False
    while True:
        ok, holder = _run(host, TRY, PATH, owner)
        if ok:
            return True, ""
        if time.monotonic() >= deadline:
            return False, (
                f"another apply holds {PATH} ({holder or 'unknown owner'}); if none is running, "
                f"remove that folder on the host"
            )
        if not told:
            progress(f"{host.name}: waiting for the apply lock held by {holder or 'unknown'}")
            told = True
        time.sleep(POLL)


def release(host: Host, owner: str) -> None:
    _run(host, RELEASE, PATH, owner)
