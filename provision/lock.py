"""A per-host apply lock, held on the host itself so applies from any machine serialise.

The lock is flock(1) on a file under /run, held by a command that runs over the apply's own
connection for as long as the apply holds the lock. The kernel releases it when that command
dies: when the apply releases it, and when the apply or its connection dies (the command
writes a heartbeat to the connection every second and ends once no one reads it). The file holds
who took it last, printed to an apply that waits.
"""

from __future__ import annotations

import getpass
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable

import gevent
from pyinfra.api.command import QuoteString, StringCommand
from pyinfra.api.host import Host
from pyinfra.connectors.ssh import SSHConnector
from pyinfra.connectors.util import CommandOutput

from provision import host_shell

# Not apply.lock: older gpuprov locked with `mkdir /run/gpuprov/apply.lock`, and a folder one left
# behind (until a reboot clears /run) would stop flock here.
PATH = "/run/gpuprov/apply.flock"
POLL = 1.0
BUSY = 75  # flock's exit status when the wait runs out

# $1 the lock file, $2 the owner token, $3 seconds to wait. Holds the lock while the file names
# the owner and the connection reads the heartbeat; prints the holder and exits BUSY on time-out.
HOLD = (
    'mkdir -p "${1%/*}" || exit 1; '
    'flock -o -E 75 -w "$3" "$1" sh -c '
    '\'printf "%s\\n" "$2" > "$1" || exit 1; '
    'while [ "$(cat "$1" 2>/dev/null)" = "$2" ] && echo held; do sleep 1; done'
    '\' gpuprov-lock "$1" "$2"; '
    's=$?; [ "$s" = 75 ] && cat "$1" 2>/dev/null; exit "$s"'
)
HOLDER = 'cat "$1" 2>/dev/null'  # who holds it (or held it last)
RELEASE = '[ "$(cat "$1" 2>/dev/null)" = "$2" ] && : > "$1"'  # the holder's loop ends


def token() -> str:
    """Who holds the lock: user@machine, pid, start time, and a unique id."""
    started = time.strftime("%Y-%m-%dT%H:%M:%S")
    who = f"{getpass.getuser()}@{socket.gethostname()}"
    return f"{who} pid {os.getpid()} since {started} {uuid.uuid4().hex[:8]}"


def _command(script: str, *args: str) -> StringCommand:
    return StringCommand("sh", "-c", QuoteString(script), "gpuprov-lock", *map(QuoteString, args))


def _stdout(output: CommandOutput) -> str:
    return "\n".join(output.stdout_lines).strip()  # sudo may warn on stderr


class _Holder:
    """HOLD on one host, run beside the apply for as long as the lock is held.

    Over SSH in a thread (paramiko blocks the thread that reads), elsewhere in a greenlet
    (the local and container connectors run commands through gevent's subprocess).
    """

    def __init__(self, host: Host, owner: str, timeout: float, path: str) -> None:
        self.command = _command(HOLD, path, owner, str(max(0, round(timeout))))
        self.host = host
        self.result: tuple[bool, CommandOutput] | None = None
        self.error = ""
        if isinstance(host.connector, SSHConnector):
            thread = threading.Thread(target=self._run, name=f"gpuprov-lock {host.name}")
            thread.daemon = True
            thread.start()
            self._join: Callable[[float], object] = thread.join
        else:
            self._join = gevent.spawn(self._run).join

    def _run(self) -> None:
        try:
            self.result = host_shell.run(self.host, self.command)
        except Exception as exc:  # a dropped connection: not held
            self.result = (False, CommandOutput([]))
            self.error = f"{type(exc).__name__}: {exc}"

    def wait(self, seconds: float) -> bool:
        """Whether the command ended within `seconds`."""
        self._join(seconds)
        return self.result is not None


_held: dict[tuple[str, str], _Holder] = {}


def acquire(
    host: Host,
    owner: str,
    timeout: float,
    progress: Callable[[str], None],
    path: str = PATH,
) -> tuple[bool, str]:
    """Wait up to `timeout` seconds for the lock; (False, why) when another apply keeps it."""
    holder = _Holder(host, owner, timeout, path)
    told = False
    while not holder.wait(POLL if told else POLL / 4):
        ok, output = host_shell.run(host, _command(HOLDER, path))
        current = _stdout(output) if ok else ""
        if current == owner:
            _held[host.name, owner] = holder
            return True, ""
        if not told and current:
            progress(f"{host.name}: waiting for the apply lock held by {current}")
            told = True
    assert holder.result is not None
    ok, output = holder.result
    if ok:  # it ran and ended at once: nothing is left to release
        return True, ""
    said = _stdout(output)
    if said:
        return False, (
            f"another apply holds {path} ({said}); it is released when that apply or its "
            f"connection ends"
        )
    why = next((ln.strip() for ln in reversed(output.stderr_lines) if ln.strip()), "")
    why = why or holder.error or "unknown error"
    return False, f"could not take the apply lock {path}: {why}"


def release(host: Host, owner: str, path: str = PATH, wait: float = 10) -> None:
    """Release the lock, and wait up to `wait` seconds for its holding command to end."""
    host_shell.run(host, _command(RELEASE, path, owner))
    holder = _held.pop((host.name, owner), None)
    if holder is not None:
        holder.wait(wait)
