"""The state dir: where test host state lives, the podman config and SSH key kept there, its lock.

$GPUPROV_TESTHOST_DIR, else ~/.cache/gpuprov/testhosts, holds podman's config and storage, the
SSH key and known_hosts, one JSON record per host, and the ccache the hosts share.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from provision.testhost.machine import run


@dataclass(frozen=True)
class Paths:
    """Where the test host state lives."""

    root: Path

    @property
    def containers_conf(self) -> Path:
        return self.root / "containers.conf"

    @property
    def storage_conf(self) -> Path:
        return self.root / "storage.conf"

    @property
    def storage(self) -> Path:
        return self.root / "storage"

    @property
    def runroot(self) -> Path:
        """podman's run state: under /run, one folder per state dir."""
        digest = hashlib.sha256(str(self.root).encode()).hexdigest()[:12]
        return Path("/run/gpuprov-testhosts") / digest

    @property
    def ssh_key(self) -> Path:
        return self.root / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.root / "known_hosts"

    @property
    def hosts(self) -> Path:
        return self.root / "hosts"

    @property
    def ccache(self) -> Path:
        return self.root / "ccache"

    @property
    def lock(self) -> Path:
        return self.root / "lock"


def state_dir(env: dict[str, str] | os._Environ[str] | None = None) -> Path:
    """$GPUPROV_TESTHOST_DIR, else ~/.cache/gpuprov/testhosts."""
    env = os.environ if env is None else env
    value = env.get("GPUPROV_TESTHOST_DIR")
    return Path(value).expanduser() if value else Path.home() / ".cache/gpuprov/testhosts"


def containers_conf_text() -> str:
    """podman engine settings that work here: runc, and ulimits a root container may set."""
    return (
        "[containers]\n"
        'default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]\n'
        "\n"
        "[engine]\n"
        'runtime = "runc"\n'
    )


def storage_conf_text(paths: Paths) -> str:
    """Image and container storage in the state dir."""
    return (
        "[storage]\n"
        'driver = "overlay"\n'
        f"graphroot = {json.dumps(str(paths.storage))}\n"
        f"runroot = {json.dumps(str(paths.runroot))}\n"
    )


def paths() -> Paths:
    """The state dir, with its config files and SSH key in place."""
    p = Paths(state_dir())
    p.hosts.mkdir(parents=True, exist_ok=True)
    for path, text in (
        (p.containers_conf, containers_conf_text()),
        (p.storage_conf, storage_conf_text(p)),
    ):
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    if not p.ssh_key.exists():
        keygen = ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gpuprov-testhost"]
        run([*keygen, "-f", str(p.ssh_key)])
    p.known_hosts.touch()
    return p


@contextlib.contextmanager
def locked(p: Paths) -> Iterator[None]:
    """Hold the state dir's lock: one build, up or down at a time."""
    with p.lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
