"""pyinfra operations the service roles share: secret files, and one unit per service kept in step.

Units of services no longer planned are stopped and removed with their EnvironmentFiles; a unit
restarts only when it, its EnvironmentFile or what it runs changed. On-demand servers (a socket
and systemd-socket-proxyd in front of each) are refused, before anything is written, on a host
that cannot run them: without systemd-socket-proxyd, or with a systemd older than 246.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import shlex
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from io import StringIO
from typing import Any, Protocol

from pyinfra import logger
from pyinfra.api.command import FileUploadCommand, QuoteString, StringCommand
from pyinfra.api.host import Host
from pyinfra.api.operation import operation
from pyinfra.context import ctx_host, host, state
from pyinfra.facts.files import Directory, File, FindFiles, Sha1File
from pyinfra.facts.server import Command
from pyinfra.operations import files, server, systemd

from provision import templates
from provision.settings import residency
from provision.settings.read import NAME

UNITS = "/etc/systemd/system"
STAGING = ".upload"  # the 0700 folder secret files are uploaded into, beside them
# Where systemd installs systemd-socket-proxyd: merged /usr first, then a split /usr.
PROXYD_PATHS = ("/usr/lib/systemd/systemd-socket-proxyd", "/lib/systemd/systemd-socket-proxyd")
# systemd-socket-proxyd gained --exit-idle-time= in systemd 246 (NEWS, "CHANGES WITH 246"):
# https://github.com/systemd/systemd/blob/main/NEWS. Everything else the on-demand units use
# (StopWhenUnneeded=, Conflicts=, ExecStartPost=, StartLimitIntervalSec=, Service=) is older.
ON_DEMAND_SYSTEMD = 246


def systemd_version() -> int:
    """systemd's version on the host (0 if unknown)."""
    m = re.match(r"systemd (\d+)", host.get_fact(Command, command="systemctl --version") or "")
    return int(m.group(1)) if m else 0


def unit_facts() -> dict[str, Any]:
    """What the unit templates ask of the host: systemd's version and nvidia-persistenced."""
    return {"systemd_version": systemd_version(), "nvidia_persistenced": has_persistenced()}


def has_failed(unit: str) -> bool:
    """Whether systemd gave up on `unit` (state failed): it may have hit its start limit, and then
    refuses to start it ("Start request repeated too quickly") until `systemctl reset-failed`."""
    command = f"systemctl show -p ActiveState --value {shlex.quote(unit)} 2>/dev/null || true"
    return (host.get_fact(Command, command=command) or "").strip() == "failed"


def has_persistenced() -> bool:
    """Whether the host has nvidia-persistenced's unit (units then start after it)."""
    return any(
        host.get_fact(File, path=f"{d}/nvidia-persistenced.service")
        for d in ("/lib/systemd/system", "/usr/lib/systemd/system", UNITS)
    )


def put_secret(name: str, content: str, dest: str) -> Any:
    """A root-owned 0600 file whose diff is never printed (it may hold a key or a token).

    It is never readable by others, not even for a moment: it is uploaded into a 0700 folder
    beside it (owned by the SSH user, who uploads before sudo copies), made root's and 0600
    there, then renamed into place. Nothing happens when the file already is so.
    """
    folder = f"{posixpath.dirname(dest)}/{STAGING}"
    user = "root"
    if host.data.get("_sudo"):  # the SSH user uploads, then sudo copies (pyinfra's put_file)
        user = (host.get_fact(Command, command="id -un", _sudo=False) or "root").strip()
    files.directory(name=f"{name}: upload folder", path=folder, mode="700", user=user)
    return _secret_file(name=name, content=content, dest=dest, folder=folder)


@operation()
def _secret_file(content: str, dest: str, folder: str) -> Generator[Any, None, None]:
    """`content` at `dest` (root's, 0600) by way of `folder`; no diff is shown."""
    wanted = hashlib.sha1(content.encode()).hexdigest()
    found = host.get_fact(File, path=dest)
    if (
        found
        and (found.get("mode"), found.get("user"), found.get("group")) == (600, "root", "root")
        and host.get_fact(Sha1File, path=dest) == wanted
    ):
        host.noop(f"secret file {dest} is up to date")
        return
    staged = f"{folder}/{posixpath.basename(dest)}"
    yield FileUploadCommand(StringIO(content), staged, remote_temp_filename=f"{staged}.upload")
    yield StringCommand("chown", "root:root", QuoteString(staged))
    yield StringCommand("chmod", "600", QuoteString(staged))
    yield StringCommand("mv", "-f", QuoteString(staged), QuoteString(dest))


def remove_folder(path: str) -> None:
    """Remove a folder gpuprov made, with what is in it, when it exists (a rerun changes
    nothing). Refuses a path that is not absolute and at least two levels deep."""
    if not path.startswith("/") or path.rstrip("/").count("/") < 2 or ".." in path.split("/"):
        raise ValueError(f"{path!r}: not a folder gpuprov removes")
    if host.get_fact(Directory, path=path):
        files.directory(name=f"Remove {path}", path=path, present=False)


def converge(
    changed: dict[str, bool],
    pattern: str,
    what: str,
    config_dir: str,
    restart_all: bool = False,
    on_demand: dict[str, bool] | None = None,
    proxies: frozenset[str] | set[str] = frozenset(),
) -> None:
    """Run every unit in `changed` (restarting the changed ones, or all with `restart_all`) and
    stop and remove the unit files matching `pattern` ("gpuprov-x-*.service", or "gpuprov-x-*"
    for services that also have sockets and proxies) that are not kept, each service's with the
    EnvironmentFile put for it, `config_dir`/<name>.env (it may hold a key).

    `on_demand` servers (their socket is in `changed`) are never started here: the first
    connection starts them. One whose unit, config or binary changed is stopped, so that the next
    connection starts what apply wrote. `proxies` are kept and left to their sockets."""
    demand = on_demand or {}
    keep = set(changed) | set(demand) | set(proxies)
    stale = sorted(
        (
            name
            for path in host.get_fact(FindFiles, path=UNITS, fname=pattern) or []
            if (name := path.rsplit("/", 1)[-1]) not in keep
        ),
        key=lambda name: (not name.endswith(".socket"), name),  # free the port first
    )
    prefix = pattern.split("*")[0]
    for unit in stale:
        systemd.service(
            name=f"Stop removed {what} {unit}", service=unit, running=False, enabled=False
        )
        files.file(name=f"Remove {unit}", path=f"{UNITS}/{unit}", present=False)
        service = unit.removeprefix(prefix).removesuffix(".service")
        if NAME.fullmatch(service) and not unit.endswith("-proxy.service"):
            env = f"{config_dir}/{service}.env"  # a name gpuprov gives a service: its file
            files.file(name=f"Remove {env}", path=env, present=False)
    if stale or any(changed.values()) or any(demand.values()):
        systemd.daemon_reload(name="Reload systemd units")
    for unit, unit_changed in demand.items():
        if unit_changed or restart_all:
            systemd.service(
                name=f"Stop {unit} (on demand: the next connection starts it)",
                service=unit,
                running=False,
                enabled=False,
            )
    for unit, unit_changed in changed.items():
        restart = unit_changed or restart_all
        # systemd counts every start against a unit's start limit (systemd < 254) and refuses
        # one past it ("Start request repeated too quickly"): a restart apply asks for, or the
        # start of a unit systemd gave up on, begins a fresh count.
        if restart or has_failed(unit):
            server.shell(
                name=f"Reset the start limit of {unit}",
                # a unit not loaded yet (never started) has no count: nothing to reset
                commands=[f"systemctl reset-failed {shlex.quote(unit)} 2>/dev/null || true"],
            )
        systemd.service(
            name=f"{'Restart' if restart else 'Run'} {unit}",
            service=unit,
            running=True,
            enabled=True,
            restarted=restart,
        )


def socket_proxyd() -> str:
    """systemd-socket-proxyd's path on the host (merged /usr or not); "" when it has none."""
    return next((path for path in PROXYD_PATHS if host.get_fact(File, path=path)), "")


def on_demand_problem(
    name: str, field: str, servers: Sequence[str], version: int, proxyd: str
) -> str:
    """Why host `name` cannot run the on-demand `servers` of `field` ("" when it can): its
    systemd (`version`, 0 when unknown) is older than 246, or it has no systemd-socket-proxyd
    (`proxyd` is ""). The Ansible roles' asserts word it alike (tests/test_on_demand_refusal.py)."""
    which = f"{field} ({', '.join(servers)})"
    if 0 < version < ON_DEMAND_SYSTEMD:
        return (
            f"{name}: on-demand servers need systemd >= {ON_DEMAND_SYSTEMD}, where"
            f" systemd-socket-proxyd has --exit-idle-time=; this host has systemd {version}."
            f" Upgrade systemd, or make {which} resident (residency: resident, no swap_group)"
        )
    if not proxyd:
        return (
            f"{name}: on-demand servers need systemd-socket-proxyd, and this host has none at"
            f" {' or '.join(PROXYD_PATHS)}. Install it (Debian and Ubuntu ship it in the"
            f" systemd package; some minimal images leave it out), or make {which} resident"
            " (residency: resident, no swap_group)"
        )
    return ""


def refuse(message: str) -> None:
    """Fail this host while its operations are planned: nothing is written to it."""
    host.log_styled(message, fg="red", log_func=logger.error)
    state.fail_hosts({_current()})  # type: ignore[no-untyped-call]


def _current() -> Host:
    """The host whose operations are being planned (pyinfra's context, not its proxy)."""
    found: Host = ctx_host.get()  # type: ignore[no-untyped-call]
    return found


def on_demand_proxyd(field: str, servers: Sequence[str]) -> str | None:
    """systemd-socket-proxyd's path for the on-demand `servers` of `field` ("" when there are
    none: nothing is read), or None when this host cannot run them. Then the host fails, saying
    why once (a host that already failed is not told again), before anything is written."""
    if not servers:
        return ""
    if _current() in state.failed_hosts:
        return None
    proxyd = socket_proxyd()
    problem = on_demand_problem(host.name, field, servers, systemd_version(), proxyd)
    if problem:
        refuse(problem)
        return None
    return proxyd


def on_demand_variables(
    unit: str, what: str, service: Mapping[str, Any], proxyd: str
) -> dict[str, Any]:
    """What the socket and proxy templates (llama_server's, for both roles) take for the
    on-demand server `unit`: `service` is its settings (an asdict() form), `what` names it."""
    host, port = residency.listen(service)
    return {
        "service": dict(service),
        "service_unit": unit.removesuffix(".service"),
        "service_what": what,
        "backend": f"{host}:{port}",
        "socket_proxyd": proxyd,
    }


def socket_units(variables: Mapping[str, Any]) -> tuple[Any, Any]:
    """An on-demand server's proxy and socket units (`on_demand_variables`): their operations."""
    base = variables["service_unit"]
    out = []
    for name, template in (
        (f"{base}-proxy.service", "llama-server-proxy.service.j2"),
        (f"{base}.socket", "llama-server.socket.j2"),
    ):
        text = templates.render("llama_server", template, **variables)
        out.append(
            files.put(name=f"Unit {name}", src=StringIO(text), dest=f"{UNITS}/{name}", mode="644")
        )
    return out[0], out[1]


class Served(Protocol):
    """A llama.cpp profile or a vLLM replica, as the service steps read it."""

    @property
    def name(self) -> str: ...

    @property
    def unit(self) -> str: ...

    @property
    def socket_unit(self) -> str: ...

    @property
    def proxy_unit(self) -> str: ...

    @property
    def on_demand(self) -> bool: ...


@dataclass(frozen=True)
class Planned:
    """One server of a role with its rendered EnvironmentFile and unit, and its settings (an
    asdict() form) for the socket and proxy templates."""

    server: Served
    settings: Mapping[str, Any]
    env: str
    unit: str


@dataclass(frozen=True)
class Role:
    """What the service steps of the llama_server and vllm roles differ in."""

    what: str  # "llama.cpp server": names one in its socket's and proxy's descriptions
    kind: str  # "profile": names one in converge's operations
    servers: str  # "servers": names them in the readiness wait's operation
    pattern: str  # "gpuprov-llama-*": every unit of the role
    config_dir: str  # where their EnvironmentFiles go
    wait_ready: tuple[str, str]  # the readiness wait of on-demand servers: source, destination


def serve(role: Role, planned: Sequence[Planned], proxyd: str, restart_all: bool = False) -> None:
    """Each server's EnvironmentFile (0600) and unit, an on-demand one's proxy and socket too
    (`proxyd` from on_demand_proxyd), then converge: resident units run (restarted when theirs
    changed, or all with `restart_all`), sockets run, and what is no longer planned goes."""
    on_demand = [p.server for p in planned if p.server.on_demand]
    if on_demand:
        files.put(
            name=f"Install the readiness wait of on-demand {role.servers}",
            src=role.wait_ready[0],
            dest=role.wait_ready[1],
            mode="755",
            create_remote_dir=True,
        )
    changed: dict[str, bool] = {}
    demand: dict[str, bool] = {}
    for p in planned:
        s = p.server
        env_op = put_secret(
            f"EnvironmentFile of {s.name} (0600)", p.env, f"{role.config_dir}/{s.name}.env"
        )
        unit_op = files.put(
            name=f"Unit {s.unit}", src=StringIO(p.unit), dest=f"{UNITS}/{s.unit}", mode="644"
        )
        if not s.on_demand:
            changed[s.unit] = bool(env_op.changed or unit_op.changed)
            continue
        proxy_op, socket_op = socket_units(
            on_demand_variables(s.unit, role.what, p.settings, proxyd)
        )
        demand[s.unit] = bool(env_op.changed or unit_op.changed or proxy_op.changed)
        changed[s.socket_unit] = bool(socket_op.changed)
    converge(
        changed,
        role.pattern,
        role.kind,
        role.config_dir,
        restart_all=restart_all,
        on_demand=demand,
        proxies={s.proxy_unit for s in on_demand},
    )
