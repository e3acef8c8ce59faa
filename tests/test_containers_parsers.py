"""docker info (text and JSON), the container toolkit, nvidia-container-cli and image parsers."""

from __future__ import annotations

import shutil

import pytest

from checks.facts.parsers import containers
from tests.conftest import FIXTURES, REAL, sh

CAPTURES = FIXTURES / "captures" / "containers"


def test_formats_detect_real_and_own_captures() -> None:
    real_json = (REAL / "docker_info_json__llamaland_fedora41_nvidia-runtime-cdi.json").read_text()
    assert containers.detect_docker_info_json(real_json)
    assert not containers.detect_docker_info_text(real_json)
    text = (CAPTURES / "docker_info__ci_no-daemon_28.2.2.txt").read_text()
    assert containers.detect_docker_info_text(text)
    assert containers.detect_nvidia_ctk(
        (REAL / "nvidia-ctk_version__nct-50_1.12.0.txt").read_text()
    )


def test_image_probe_quotes_the_ref() -> None:
    probe = containers.image_probe("nvidia/cuda:12.8.1-base-ubuntu24.04; rm -rf /")
    assert "'nvidia/cuda:12.8.1-base-ubuntu24.04; rm -rf /'" in probe.command
    assert probe.requires == "docker"


@pytest.mark.skipif(not shutil.which("docker"), reason="needs the docker client")
def test_docker_probe_without_a_daemon_fails_fast() -> None:
    probe = next(p for p in containers.PROBES if p.name == "docker")
    docker = probe.parse(sh(probe.command, check=False)).containers.docker
    assert docker is not None and docker.client_version
    if docker.server_version is None:
        assert docker.server_error and "Docker daemon" in docker.server_error


@pytest.mark.skipif(not shutil.which("docker"), reason="needs the docker client")
def test_docker_info_text_here() -> None:
    docker = containers.parse_docker_info_text(sh("docker info", check=False)).containers.docker
    assert docker is not None and docker.client_version


def test_toolkit_probe_runs_here() -> None:
    probe = next(p for p in containers.PROBES if p.name == "container-toolkit")
    facts = probe.parse(sh(probe.command))
    assert facts.containers.runtime_hook == bool(shutil.which("nvidia-container-runtime-hook"))
    assert isinstance(facts.containers.cdi_specs, list)


def test_every_probe_has_a_timeout() -> None:
    for probe in containers.PROBES:
        assert 0 < probe.timeout <= 60


def test_only_the_cdi_refresh_units_status_says_its_state() -> None:
    """`systemctl status` of another unit (nvidia-persistenced, as pasted in issues) sets
    nothing; the refresh unit's own status does, however its title line is worded."""
    other = (
        "\u00d7 nvidia-persistenced.service - NVIDIA Persistence Daemon\n"
        "     Loaded: loaded (/lib/systemd/system/nvidia-persistenced.service; static)\n"
        "     Active: failed (Result: exit-code) since Tue 2024-01-09 10:11:12 UTC; 1min ago\n"
    )
    assert not containers.detect_cdi_refresh_status(other)
    own = other.replace("nvidia-persistenced", "nvidia-cdi-refresh").replace(
        "NVIDIA Persistence Daemon", "Refresh NVIDIA CDI specification file"
    )
    assert containers.parse_cdi_refresh_status(own).containers.cdi_refresh == "failed"
