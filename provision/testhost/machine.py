"""What test hosts need from this machine, and how its commands are run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence

Log = Callable[[str], None]

TOOLS = {
    "podman": "apt-get install podman runc",
    "runc": "apt-get install runc",
    "ip": "apt-get install iproute2",
    "ssh": "apt-get install openssh-client",
    "ssh-keygen": "apt-get install openssh-client",
    "tar": "apt-get install tar",
    "debootstrap": "apt-get install debootstrap",
}


class TestHostError(RuntimeError):
    """A test host could not be built, started or stopped; the message says what to do."""

    __test__ = False  # not a pytest class


def log_to_stderr(message: str) -> None:
    """The default Log: one line on stderr."""
    print(f"testhost: {message}", file=sys.stderr, flush=True)


def run(
    command: Sequence[str],
    env: dict[str, str] | None = None,
    check: bool = True,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run `command`, output captured; TestHostError when it is missing, times out or fails."""
    try:
        done = subprocess.run(
            list(command), capture_output=True, text=True, env=env, timeout=timeout, check=False
        )
    except FileNotFoundError:
        raise TestHostError(f"{command[0]} is not installed") from None
    except subprocess.TimeoutExpired:
        raise TestHostError(f"timed out after {timeout:.0f} s: {' '.join(command)}") from None
    if check and done.returncode != 0:
        output = (done.stderr or done.stdout).strip()
        raise TestHostError(f"{' '.join(command)} failed ({done.returncode}): {output}")
    return done


def missing_requirements(build: bool = True) -> list[str]:
    """What this machine lacks to run test hosts (to build the image too when `build`)."""
    problems = []
    if os.geteuid() != 0:
        problems.append("test hosts need root (network namespaces, podman with systemd)")
    for tool, fix in TOOLS.items():
        if (build or tool != "debootstrap") and shutil.which(tool) is None:
            problems.append(f"{tool} is missing: {fix}")
    return problems


def require(build: bool = True) -> None:
    """TestHostError naming everything missing_requirements finds."""
    problems = missing_requirements(build)
    if problems:
        raise TestHostError("; ".join(problems))
