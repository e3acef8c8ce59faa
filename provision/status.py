"""What runs on a host that gpuprov manages: one script per host, its parse, and the status.

The script reads systemd (each unit's state, since when, its restarts, and those of the last hour
from the journal), the canary's journal, the llama.cpp builds and `current`, the containers, and
the GPU memory each process holds (nvidia-smi's compute apps, mapped to units by their cgroup).
The parse is pure and never raises: what a host did not answer stays unknown.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from provision.stack import Stack

MARK = "#=gpuprov-status="
_SECTION = re.compile(rf"^{re.escape(MARK)} (\S+)(?: (\S+))?$", re.M)
_CGROUP_UNIT = re.compile(r"/(gpuprov-[\w.@-]+\.service)$")
_CGROUP_DOCKER = re.compile(r"/docker-([0-9a-f]{12,64})\.scope$|/docker/([0-9a-f]{12,64})$")
CANARY_UNIT = "gpuprov-canary.service"
NGINX_UNIT = "nginx.service"
_SHOW = "Id,LoadState,ActiveState,SubState,ActiveEnterTimestamp,StateChangeTimestamp,NRestarts"


@dataclass(frozen=True)
class Service:
    """A unit gpuprov manages on the host, as the inventory names it."""

    name: str
    unit: str
    kind: str  # llama, vllm, balancer, canary
    container: str = ""
    socket: str = ""  # an on-demand server's socket unit, which owns its port


def managed(stack: Stack) -> list[Service]:
    """The units the inventory puts on a host, in the order apply writes them."""
    out = [
        Service(p.name, p.unit, "llama", socket=p.socket_unit if p.on_demand else "")
        for p in stack.profiles
    ]
    out += [
        Service(r.name, r.unit, "vllm", r.container, r.socket_unit if r.on_demand else "")
        for r in stack.vllm.replicas
    ]
    if stack.balancer.enabled:
        out.append(Service("balancer", NGINX_UNIT, "balancer"))
    if stack.canary.enabled and (stack.profiles or stack.vllm.replicas):
        out.append(Service("canary", "gpuprov-canary.timer", "canary"))
    return out


def script(stack: Stack, engine: str) -> str:
    """One POSIX sh script that prints every section `parse` reads (read-only)."""
    services = managed(stack)
    names = [s.unit for s in services] + [s.socket for s in services if s.socket]
    units = " ".join(shlex.quote(name) for name in names)
    prefix = shlex.quote(stack.prefix)
    return "\n".join(
        [
            "PATH=$PATH:/usr/sbin:/sbin",
            f"for u in $({{ printf '%s\\n' {units}; systemctl list-unit-files --no-legend "
            "--plain 'gpuprov-*' 2>/dev/null | awk '{print $1}'; } | sort -u); do",
            f'  echo "{MARK} unit $u"',
            f'  systemctl show -p {_SHOW} "$u" 2>/dev/null',
            f'  echo "{MARK} restarts-1h $u"',
            '  journalctl -u "$u" --since -1h -o cat --no-pager 2>/dev/null'
            " | grep -c 'Scheduled restart job'",
            "done",
            f'echo "{MARK} canary"',
            f"journalctl -u {CANARY_UNIT} -n 400 -o short-iso --no-pager 2>/dev/null | tail -n 400",
            f'echo "{MARK} current"',
            f"readlink {prefix}/current 2>/dev/null",
            f'echo "{MARK} builds"',
            f"ls -1 {prefix}/builds 2>/dev/null",
            f'echo "{MARK} gpu-apps"',
            "nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits "
            "2>/dev/null",
            f'echo "{MARK} cgroups"',
            "for p in $(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null);"
            ' do echo "$p $(tail -n 1 /proc/$p/cgroup 2>/dev/null)"; done',
            f'echo "{MARK} containers"',
            f"{shlex.quote(engine)} ps --no-trunc --format '{{{{.ID}}}} {{{{.Names}}}} "
            "{{.Image}}' 2>/dev/null",
            "exit 0",
        ]
    )


@dataclass
class UnitState:
    unit: str
    load: str | None = None
    active: str | None = None
    sub: str | None = None
    since: str | None = None
    restarts: int | None = None
    restarts_last_hour: int | None = None


@dataclass
class HostState:
    """What the script printed, read into fields; anything absent stays None or empty."""

    units: dict[str, UnitState] = field(default_factory=dict)
    canary: list[str] = field(default_factory=list)
    current: str | None = None
    builds: list[str] = field(default_factory=list)
    gpu_mib: dict[str, int] = field(default_factory=dict)  # unit or container: MiB it holds
    containers: dict[str, str] = field(default_factory=dict)  # name: image


def parse(text: str) -> HostState:
    """The script's output; never raises."""
    state = HostState()
    marks = list(_SECTION.finditer(text))
    pids: dict[str, int] = {}
    cgroups: dict[str, str] = {}
    ids: dict[str, str] = {}
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        body = text[mark.end() : end].strip("\n")
        kind, arg = mark.group(1), mark.group(2) or ""
        lines = [line for line in body.splitlines() if line.strip()]
        if kind == "unit" and arg:
            state.units.setdefault(arg, UnitState(arg))
            _show(state.units[arg], lines)
        elif kind == "restarts-1h" and arg in state.units and lines and lines[0].isdigit():
            state.units[arg].restarts_last_hour = int(lines[0])
        elif kind == "canary":
            state.canary = lines
        elif kind == "current" and lines:
            state.current = lines[0].strip().rstrip("/").rsplit("/", 1)[-1] or None
        elif kind == "builds":
            state.builds = [line.strip() for line in lines]
        elif kind == "gpu-apps":
            for line in lines:
                pid, _, mib = line.partition(",")
                if pid.strip().isdigit() and mib.strip().isdigit():
                    pids[pid.strip()] = pids.get(pid.strip(), 0) + int(mib.strip())
        elif kind == "cgroups":
            for line in lines:
                pid, _, cgroup = line.strip().partition(" ")
                cgroups[pid] = cgroup.strip()
        elif kind == "containers":
            for line in lines:
                parts = line.split()
                if len(parts) >= 3:
                    ids[parts[0]] = parts[1]
                    state.containers[parts[1]] = parts[2]
    for pid, held in pids.items():
        owner = _owner(cgroups.get(pid, ""), ids)
        if owner:
            state.gpu_mib[owner] = state.gpu_mib.get(owner, 0) + held
    return state


def _show(unit: UnitState, lines: list[str]) -> None:
    """`systemctl show -p ...` lines (systemd prints them in its own order)."""
    values = {}
    for line in lines:
        key, sep, value = line.partition("=")
        if sep:
            values[key] = value.strip()
    unit.load = values.get("LoadState") or None
    unit.active = values.get("ActiveState") or None
    unit.sub = values.get("SubState") or None
    stamp = "ActiveEnterTimestamp" if unit.active == "active" else "StateChangeTimestamp"
    since = values.get(stamp, "")
    unit.since = since if since and since != "n/a" else None
    restarts = values.get("NRestarts", "")
    unit.restarts = int(restarts) if restarts.isdigit() and len(restarts) < 10 else None


def _owner(cgroup: str, ids: dict[str, str]) -> str | None:
    """The unit (or container name) a process's cgroup line belongs to."""
    path = cgroup.rpartition(":")[2]
    unit = _CGROUP_UNIT.search(path)
    if unit is not None:
        return unit.group(1)
    docker = _CGROUP_DOCKER.search(path)
    if docker is not None:
        cid = docker.group(1) or docker.group(2)
        return next((name for full, name in ids.items() if full.startswith(cid)), None)
    return None


def last_canary(lines: list[str], unit: str) -> str | None:
    """The canary's last line about `unit`: "2026-11-24T06:10:02+0000 ok: ..."."""
    needle = f" {unit}: "
    for line in reversed(lines):
        at = line.find(needle)
        if at != -1:
            stamp = line.split(" ", 1)[0]
            return f"{stamp} {line[at + len(needle) :].strip()}"
    return None
