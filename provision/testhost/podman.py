"""podman: the environment its calls run with, and the containers test hosts run in.

Each host runs /lib/systemd/systemd as PID 1 under podman (runc), in its network namespace.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from provision.testhost.machine import run
from provision.testhost.network import netns_name
from provision.testhost.state import Paths

LABEL = "gpuprov.testhost"


def podman_env(paths: Paths, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment every podman call runs with."""
    env = dict(os.environ if base is None else base)
    env["CONTAINERS_CONF"] = str(paths.containers_conf)
    env["CONTAINERS_STORAGE_CONF"] = str(paths.storage_conf)
    return env


def container_name(name: str) -> str:
    return f"gp-{name}"


def run_command(
    name: str, image: str, pubkey: Path, volumes: Sequence[tuple[str, str]] = ()
) -> list[str]:
    """podman run for host `name`: systemd as PID 1 in the host's namespace."""
    command = [
        "podman",
        "run",
        "-d",
        "--name",
        container_name(name),
        "--hostname",
        name,
        "--label",
        f"{LABEL}={name}",
        "--network",
        f"ns:/run/netns/{netns_name(name)}",
        "--systemd=always",
        "-v",
        f"{pubkey}:/root/.ssh/authorized_keys:ro",
    ]
    for src, dst in volumes:
        command += ["-v", f"{src}:{dst}"]
    return [*command, image, "/lib/systemd/systemd"]


def podman(p: Paths, *args: str, check: bool = True, timeout: float = 120) -> str:
    """podman `args` with the state dir's config; its stdout."""
    return run(["podman", *args], env=podman_env(p), check=check, timeout=timeout).stdout


def image_exists(p: Paths, ref: str) -> bool:
    env = podman_env(p)
    return run(["podman", "image", "exists", ref], env=env, check=False).returncode == 0


def start(p: Paths, name: str, image: str, volumes: Sequence[tuple[str, str]] = ()) -> None:
    """Start host `name`'s container from `image`, our SSH public key authorized."""
    pubkey = p.ssh_key.with_suffix(".pub")
    run(run_command(name, image, pubkey, volumes), env=podman_env(p))


def running(p: Paths, container: str) -> bool:
    out = podman(p, "container", "inspect", "-f", "{{.State.Running}}", container, check=False)
    return out.strip() == "true"


def remove(p: Paths, name: str) -> bool:
    """Remove host `name`'s container; False when there was none."""
    container = container_name(name)
    exists = ["podman", "container", "exists", container]
    if run(exists, env=podman_env(p), check=False).returncode != 0:
        return False
    podman(p, "rm", "-f", "-t", "5", container, timeout=60)
    return True
