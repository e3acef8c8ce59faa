"""gpuprov's per-host apply lock as an Ansible action, so a play and `gpuprov apply` exclude each
other, and two plays on one host run one after the other.

`state: held` takes the lock gpuprov takes (provision/lock.py): flock(1) on
/run/gpuprov/apply.flock, whose content names the holder. The flock is held by a command left
running on the host in the background until `state: released` empties the file (as gpuprov's
release does), the play's connection to the host ends, or `hold` seconds pass, whichever is first.
gpuprov's holder ends with its connection; this one watches the host side of the play's
connection instead: the sshd process of Ansible's multiplexed SSH connection (ControlPersist,
Ansible's default, keeps it open for the play and 60 s after), or ansible-playbook itself with
connection local. So a failed host, whose post_tasks never run, or a killed play, releases the
lock once its connection closes. A play that waits longer than `timeout` seconds fails, naming
who holds the lock.

A lock still naming a play of this controller that has ended (its host failed, so its post_tasks
never ran, and a later play reuses its SSH connection) is released when the next play takes it.
The action needs only sh and flock on the host (util-linux), and nothing beyond Ansible on the
controller; the holder's name is the host fact `gpuprov_lock_owner` between the two calls.
"""

from __future__ import annotations

import getpass
import os
import re
import shlex
import socket
import time
import uuid
from typing import Any

from ansible.plugins.action import ActionBase

PATH = "/run/gpuprov/apply.flock"  # provision/lock.py PATH
BUSY = 75  # flock's exit status when the wait runs out (provision/lock.py BUSY)
ARGS = frozenset(("state", "path", "timeout", "hold"))

# $1 the lock file, $2 the owner, $3 seconds to wait, $4 seconds to hold at most, $5 the process
# whose end releases it (0: none). The background holder: provision/lock.py's HOLD, watching the
# connection's process on the host where gpuprov's heartbeat watches its connection.
HOLD = (
    'flock -o -E 75 -w "$3" "$1" sh -c '
    '\'printf "%s\\n" "$2" > "$1" || exit 1; e=0; '
    'while [ "$(cat "$1" 2>/dev/null)" = "$2" ] && [ "$e" -lt "$3" ] '
    '&& { [ "$4" = 0 ] || [ -d "/proc/$4" ]; }; '
    "do sleep 1; e=$((e + 1)); done"
    '\' gpuprov-lock "$1" "$2" "$4" "$5"'
)
# The play's connection on the host: the nearest sshd ancestor, else the farthest
# ansible-playbook (connection local); 0 when neither is found.
WATCH = (
    'w=0; a=$$; while [ "${a:-0}" -gt 1 ]; do '
    "a=$(sed -n 's/^PPid:[[:space:]]*//p' \"/proc/$a/status\" 2>/dev/null); "
    '[ -n "$a" ] || break; '
    'case "$(cat "/proc/$a/comm" 2>/dev/null)" in sshd|sshd-session) w=$a; break ;; '
    "ansible-playboo*) w=$a ;; esac; done; "  # comm: the first 15 characters
)
# Start HOLD in the background, then wait until the file names the owner (held) or the holder
# ended without it (busy: print who holds it). While it waits it writes a line a second to the
# connection: when the play dies, the write (or the tty's hang-up) ends it and its holder.
TAKE = (
    'mkdir -p "${1%/*}" || exit 1; '
    + WATCH
    + 'setsid sh -c "$5" gpuprov-lock "$1" "$2" "$3" "$4" "$w" </dev/null >/dev/null 2>&1 & '
    "p=$!; trap 'kill \"$p\" 2>/dev/null; exit 1' HUP PIPE TERM; i=0; "
    'while :; do [ "$(cat "$1" 2>/dev/null)" = "$2" ] && exit 0; '
    'kill -0 "$p" 2>/dev/null || { echo; cat "$1" 2>/dev/null; exit 75; }; '
    'i=$((i + 1)); [ $((i % 5)) = 0 ] && { echo waiting || { kill "$p"; exit 1; }; }; '
    "sleep 0.2; done"
)
RELEASE = '[ "$(cat "$1" 2>/dev/null)" = "$2" ] && : > "$1"; exit 0'  # provision/lock.py RELEASE
# RELEASE, then time for the holder to see it and for one waiting behind it to take the lock.
RELEASE_STALE = '[ "$(cat "$1" 2>/dev/null)" = "$2" ] && : > "$1"; sleep 1.5'
STALE_ROUNDS = 10
HOLDER = re.compile(r"ansible-playbook (\S+) pid (\d+) since ")


def who() -> str:
    return f"{getpass.getuser()}@{socket.gethostname()}"


def owner() -> str:
    """Who holds the lock: as provision/lock.py names a holder, marked as a play (the pid is
    ansible-playbook's, whose workers run this)."""
    started = time.strftime("%Y-%m-%dT%H:%M:%S")
    return f"ansible-playbook {who()} pid {os.getppid()} since {started} {uuid.uuid4().hex[:8]}"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stale(holder: str) -> bool:
    """Whether `holder` is a play of this controller that has ended. Its lock would otherwise
    outlive it: its SSH connection, which the lock watches, is the one a later play reuses
    (ControlPersist)."""
    m = HOLDER.match(holder)
    return bool(m) and m.group(1) == who() and not alive(int(m.group(2)))


def command(script: str, *args: str) -> str:
    return " ".join(["sh", "-c", shlex.quote(script), "gpuprov-lock", *map(shlex.quote, args)])


class ActionModule(ActionBase):
    """Take or release gpuprov's apply lock on the target."""

    TRANSFERS_FILES = False
    _VALID_ARGS = ARGS

    def _read(self, path: str) -> str:
        """Who holds the lock (or held it last)."""
        ran = self._low_level_execute_command(command('cat "$1" 2>/dev/null', path), sudoable=True)
        return str(ran.get("stdout", "")).strip()

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result: dict[str, Any] = super().run(tmp, task_vars)
        result["changed"] = False  # a lock is no change to the host
        args = self._task.args
        state = str(args.get("state", "held"))
        path = str(args.get("path", PATH))
        if state not in ("held", "released") or not path.startswith("/"):
            result.update(failed=True, msg="gpuprov_lock: state is held or released, path absolute")
            return result
        if state == "released":
            mine = str(task_vars.get("gpuprov_lock_owner", ""))
            if mine:
                self._low_level_execute_command(command(RELEASE, path, mine), sudoable=True)
            result["ansible_facts"] = {"gpuprov_lock_owner": ""}
            return result
        timeout = int(args.get("timeout", 600))
        hold = int(args.get("hold", 4 * 3600))
        found = self._low_level_execute_command(
            command('cat "$1" 2>/dev/null', path), sudoable=True
        )
        holder = str(found.get("stdout", "")).strip()
        if holder and holder == task_vars.get("gpuprov_lock_owner"):
            result["owner"] = holder  # this play holds it already
            return result
        for _ in range(STALE_ROUNDS):  # a dead play's holder may have waited behind another
            if not stale(holder):
                break
            self._low_level_execute_command(command(RELEASE_STALE, path, holder), sudoable=True)
            holder = self._read(path)
        mine = owner()
        ran = self._low_level_execute_command(
            command(TAKE, path, mine, str(timeout), str(hold), HOLD), sudoable=True
        )
        if ran.get("rc") == 0:
            result["ansible_facts"] = {"gpuprov_lock_owner": mine}
            result["owner"] = mine
            return result
        said = (str(ran.get("stdout", "")).strip().splitlines() or [""])[-1].strip()
        if ran.get("rc") == BUSY and said:
            why = f"another apply holds {path} ({said}); waited {timeout} s"
        else:
            why = f"could not take the apply lock {path}: {ran.get('stderr', '')}".strip()
        result.update(failed=True, msg=why)
        return result
