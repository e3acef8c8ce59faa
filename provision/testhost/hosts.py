"""Test hosts: systemd containers in their own network namespaces, reached over SSH.

A host's record (a JSON file in the state dir) names its index, address, container and
namespace; up, down and list_hosts make, remove and read them. The golden image is in image.py,
the namespaces and addresses in network.py, the containers in podman.py.
"""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from provision.testhost import network, podman
from provision.testhost.image import ensure_image
from provision.testhost.machine import Log, TestHostError, log_to_stderr, require, run
from provision.testhost.state import Paths, locked, paths, state_dir

BOOT_TIMEOUT = 60.0
CCACHE_MOUNT = "/var/cache/gpuprov/ccache"
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$")


@dataclass(frozen=True)
class TestHost:
    """A running test host and how to reach it."""

    __test__ = False  # not a pytest class

    name: str
    index: int
    address: str
    container: str
    netns: str
    ssh_key: Path
    known_hosts: Path

    def record(self) -> dict[str, Any]:
        """The JSON record kept in the state dir."""
        return {k: v for k, v in asdict(self).items() if k not in ("ssh_key", "known_hosts")}

    def to_json(self) -> dict[str, Any]:
        """Everything, paths as strings."""
        return {**self.record(), "ssh_key": str(self.ssh_key), "known_hosts": str(self.known_hosts)}


def check_name(name: str) -> str:
    """`name` if it is a valid test host name (lowercase letters, digits, inner dashes)."""
    if not _NAME.match(name):
        raise TestHostError(
            f"bad test host name {name!r}: use 1-32 lowercase letters, digits and inner dashes"
        )
    return name


def parse_volume(spec: str) -> tuple[str, str]:
    """SRC:DST (SRC made absolute; DST absolute) from a --volume value."""
    src, sep, dst = spec.partition(":")
    if not sep or not src or not dst.startswith("/") or ":" in dst:
        raise TestHostError(f"bad volume {spec!r}: use SRC:DST with an absolute DST")
    return str(Path(src).expanduser().absolute()), dst


# --- SSH --------------------------------------------------------------------------------------


def ssh_options(key: Path, known_hosts: Path) -> list[str]:
    """ssh options for a test host: our key only, our known_hosts, no prompts."""
    return [
        "-F",
        "none",
        "-i",
        str(key),
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=accept-new",
        "-o",
        f"UserKnownHostsFile={known_hosts}",
        "-o",
        "HashKnownHosts=no",
        "-o",
        "ConnectTimeout=5",
        "-o",
        "LogLevel=ERROR",
    ]


def ssh_command(host: TestHost, *remote: str) -> list[str]:
    """ssh root@host running `remote` (one shell command line, or words ssh joins)."""
    return ["ssh", *ssh_options(host.ssh_key, host.known_hosts), f"root@{host.address}", *remote]


def pyinfra_host(host: TestHost) -> tuple[str, dict[str, Any]]:
    """(name, data) for a pyinfra inventory: root over SSH with the test host key."""
    return host.address, {
        "ssh_user": "root",
        "ssh_key": str(host.ssh_key),
        "ssh_known_hosts_file": str(host.known_hosts),
        "ssh_strict_host_key_checking": "accept-new",
    }


def _forget_host_key(p: Paths, addr: str) -> None:
    run(["ssh-keygen", "-R", addr, "-f", str(p.known_hosts)], check=False)
    Path(f"{p.known_hosts}.old").unlink(missing_ok=True)


def _wait_for_banner(addr: str, deadline: float) -> None:
    while True:
        try:
            with socket.create_connection((addr, 22), timeout=2) as conn:
                conn.settimeout(2)
                if conn.recv(64).startswith(b"SSH-"):
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TestHostError(f"no SSH banner from {addr}:22 within {BOOT_TIMEOUT:.0f} s")
        time.sleep(0.1)


def system_state(host: TestHost, timeout: float = BOOT_TIMEOUT) -> str:
    """`systemctl is-system-running --wait` on the host."""
    command = ssh_command(host, "systemctl", "is-system-running", "--wait")
    return run(command, check=False, timeout=timeout).stdout.strip()


def _wait_for_boot(host: TestHost, deadline: float) -> str:
    _wait_for_banner(host.address, deadline)
    state = ""
    while time.monotonic() < deadline:
        state = system_state(host, timeout=max(deadline - time.monotonic(), 1))
        if state in ("running", "degraded"):
            return state
        time.sleep(0.2)
    raise TestHostError(f"{host.name}: systemd did not finish booting (state {state or '?'})")


# --- records ----------------------------------------------------------------------------------


def _record_path(p: Paths, name: str) -> Path:
    return p.hosts / f"{name}.json"


def _load(p: Paths, path: Path) -> TestHost | None:
    try:
        data = json.loads(path.read_text())
        return TestHost(
            name=data["name"],
            index=int(data["index"]),
            address=data["address"],
            container=data["container"],
            netns=data["netns"],
            ssh_key=p.ssh_key,
            known_hosts=p.known_hosts,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def list_hosts() -> list[TestHost]:
    """Hosts with a record in the state dir, by index."""
    p = Paths(state_dir())
    if not p.hosts.is_dir():
        return []
    found = (_load(p, path) for path in sorted(p.hosts.glob("*.json")))
    return sorted((h for h in found if h), key=lambda h: h.index)


# --- up and down ------------------------------------------------------------------------------


def up(
    name: str,
    index: int | None = None,
    volumes: Sequence[str | tuple[str, str]] = (),
    log: Log = log_to_stderr,
) -> TestHost:
    """Start test host `name` (or return it unchanged when it is already running)."""
    check_name(name)
    mounts = [parse_volume(v) if isinstance(v, str) else v for v in volumes]
    image = ensure_image(log=log)
    p = paths()
    with locked(p):
        old = _load(p, _record_path(p, name))
        if old and podman.running(p, old.container) and network.netns_exists(old.netns):
            if index is None or index == old.index:
                return old
            raise TestHostError(f"{name} is already up as index {old.index}; bring it down first")
        _teardown(p, name, old)
        used = {h.index for h in list_hosts()} | network.veths_in_use()
        if index is None:
            index = old.index if old and old.index not in used else network.pick_index(used)
        elif not 1 <= index <= network.MAX_INDEX or index in used:
            raise TestHostError(f"index {index} is taken or outside 1..{network.MAX_INDEX}")
        host = TestHost(
            name=name,
            index=index,
            address=network.address(index),
            container=podman.container_name(name),
            netns=network.netns_name(name),
            ssh_key=p.ssh_key,
            known_hosts=p.known_hosts,
        )
        start = time.monotonic()
        log(f"starting {name} at {host.address}")
        try:
            network.add(name, index)
            _forget_host_key(p, host.address)
            podman.start(p, name, image, mounts)
            _record_path(p, name).write_text(json.dumps(host.record(), indent=2) + "\n")
            state = _wait_for_boot(host, start + BOOT_TIMEOUT)
        except BaseException:
            _teardown(p, name, host)
            raise
        log(f"{name} is up ({state}) in {time.monotonic() - start:.1f} s")
        return host


def _teardown(p: Paths, name: str, host: TestHost | None) -> bool:
    """Remove the container, namespace, veth and record of `name`; True when anything was."""
    found = podman.remove(p, name)
    found = network.remove_netns(name) or found
    if host is not None:
        network.remove_veth(host.index)
        _forget_host_key(p, host.address)
    record = _record_path(p, name)
    if record.exists():
        record.unlink()
        found = True
    return found


def down(name: str, log: Log = log_to_stderr) -> bool:
    """Stop and remove test host `name`; False when there was nothing to remove."""
    check_name(name)
    require(build=False)
    p = paths()
    with locked(p):
        start = time.monotonic()
        host = _load(p, _record_path(p, name))
        found = _teardown(p, name, host)
    if found:
        log(f"{name} is down in {time.monotonic() - start:.1f} s")
    return found
