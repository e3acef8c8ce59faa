"""Real systemd test hosts for end-to-end tests (provision/testhost/).

They need root, podman, runc and debootstrap: without them the tests skip, or fail when
GPUPROV_E2E=required. Hosts come down at the end of the session unless
GPUPROV_KEEP_TESTHOSTS=1. Every host mounts <state dir>/ccache at /var/cache/gpuprov/ccache,
so compiler output survives between runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from provision.testhost import hosts
from provision.testhost.machine import missing_requirements
from provision.testhost.state import state_dir

MakeHost = Callable[..., hosts.TestHost]
SDIST = "llama-cpp-python==0.3.36"


def require_testhosts() -> None:
    """Skip when test hosts cannot run here, unless GPUPROV_E2E=required (then fail)."""
    problems = missing_requirements(build=True)
    if problems:
        reason = "test hosts unavailable: " + "; ".join(problems)
        if os.environ.get("GPUPROV_E2E") == "required":
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture(scope="session", name="testhost_factory")
def testhost_factory_fixture() -> Iterator[MakeHost]:
    """make(name, volumes=()) -> TestHost: a freshly booted host, the same one on later calls."""
    require_testhosts()
    keep = os.environ.get("GPUPROV_KEEP_TESTHOSTS") == "1"
    ccache = state_dir() / "ccache"
    ccache.mkdir(parents=True, exist_ok=True)
    made: list[str] = []

    def make(name: str, volumes: Sequence[tuple[str, str]] = ()) -> hosts.TestHost:
        if not keep and name not in made:
            hosts.down(name)
        host = hosts.up(name, volumes=[(str(ccache), hosts.CCACHE_MOUNT), *volumes])
        if name not in made:
            made.append(name)
        return host

    yield make
    if not keep:
        for name in made:
            hosts.down(name)


@pytest.fixture(scope="session", name="testhost")
def testhost_fixture(testhost_factory: MakeHost) -> hosts.TestHost:
    """The shared host e2e1."""
    return testhost_factory("e2e1")


@pytest.fixture(scope="session")
def sdist() -> Path:
    """The llama-cpp-python sdist (llama.cpp's source in vendor/), downloaded once."""
    cache = state_dir() / "sources"
    cache.mkdir(parents=True, exist_ok=True)
    found = sorted(cache.glob("llama_cpp_python-*.tar.gz"))
    if not found:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--no-binary",
                ":all:",
                "-d",
                str(cache),
                SDIST,
            ],
            check=True,
        )
        found = sorted(cache.glob("llama_cpp_python-*.tar.gz"))
    return found[-1]
