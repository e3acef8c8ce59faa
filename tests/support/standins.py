"""The Docker and nvidia-smi stand-ins on a test host: installing them, reading back their calls.

Test hosts have no Docker engine and no GPU. tests/support/standin_docker.py (as
/usr/local/bin/docker) and tests/support/standin_nvidia_smi.py (as /usr/bin/nvidia-smi) stand in
for them, so units, restarts, the balancer and the canary run for real while the container and the
GPU do not. Everything goes over one SSH call as a tar archive on stdin.
"""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from provision.testhost import hosts

HERE = Path(__file__).resolve().parent
DOCKER = "usr/local/bin/docker"
NVIDIA_SMI = "usr/bin/nvidia-smi"
DOCKER_ROOT = "var/lib/standin-docker"
DOCKER_CATALOG = "etc/standin-docker"
GPUS = "etc/standin-nvidia-smi/gpus.json"
_DIRS = (DOCKER_CATALOG, f"{DOCKER_CATALOG}/images", "etc/standin-nvidia-smi", DOCKER_ROOT)


def bundle(*, gpus: Path, images: Sequence[Path], docker_info: Path) -> bytes:
    """A tar archive of the stand-ins and their data, paths relative to /."""
    files = [
        (DOCKER, (HERE / "standin_docker.py").read_bytes(), 0o755),
        (NVIDIA_SMI, (HERE / "standin_nvidia_smi.py").read_bytes(), 0o755),
        (f"{DOCKER_CATALOG}/info.json", docker_info.read_bytes(), 0o644),
        (GPUS, gpus.read_bytes(), 0o644),
        *((f"{DOCKER_CATALOG}/images/{p.name}", p.read_bytes(), 0o644) for p in images),
    ]
    out = io.BytesIO()
    now = time.time()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name in _DIRS:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, now
            tar.addfile(info)
        for name, data, mode in files:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, now
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


# Run from / on the host; the catalog's images are replaced, the docker state is kept.
INSTALL_COMMAND = f"cd / && rm -rf {DOCKER_CATALOG}/images && tar -xf - --no-same-owner"
CALLS_COMMAND = f"cd / && cat {DOCKER_ROOT}/calls.log 2>/dev/null || true"


def _ssh(host: hosts.TestHost, command: str, data: bytes = b"") -> bytes:
    done = subprocess.run(
        hosts.ssh_command(host, command), input=data, capture_output=True, timeout=60
    )
    if done.returncode != 0:
        error = done.stderr.decode(errors="replace").strip()
        raise RuntimeError(f"{command!r} on {host.name} failed ({done.returncode}): {error}")
    return done.stdout


def install(host: hosts.TestHost, *, gpus: Path, images: Sequence[Path], docker_info: Path) -> None:
    """Put docker (/usr/local/bin), nvidia-smi (/usr/bin) and their data on `host`.

    + gpus: the GPU description nvidia-smi answers from (/etc/standin-nvidia-smi/gpus.json)
    + images: `docker image inspect` captures, the catalog `docker pull` serves
    + docker_info: a `docker info --format '{{json .}}'` capture
    """
    _ssh(host, INSTALL_COMMAND, bundle(gpus=gpus, images=images, docker_info=docker_info))


def parse_calls(text: str) -> list[dict[str, Any]]:
    """calls.log: one {"argv": [...], "env": {NAME: hash}} per docker call, oldest first."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def calls(host: hosts.TestHost) -> list[dict[str, Any]]:
    """Every docker call made on `host` so far."""
    return parse_calls(_ssh(host, CALLS_COMMAND).decode())
