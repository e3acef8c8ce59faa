"""The Python stack probe (metadata only) and pip list/freeze parsing."""

from __future__ import annotations

import os
from pathlib import Path

from checks.facts.parsers import pystack
from tests.conftest import sh


def _dist(site: Path, dirname: str, name: str, version: str) -> None:
    meta = site / dirname
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_probe_reads_a_virtualenv_without_importing(tmp_path: Path) -> None:
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    _dist(site, "torch-2.6.0+cu126.dist-info", "torch", "2.6.0+cu126")
    _dist(site, "vllm-0.8.5.dist-info", "vllm", "0.8.5")
    _dist(site, "torchvision-0.21.0.dist-info", "torchvision", "0.21.0")
    # A torch package that would fail on import: the probe must never import it.
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text("raise SystemExit('imported')\n")
    env = {**os.environ, "VIRTUAL_ENV": str(tmp_path)}
    (probe,) = pystack.PROBES
    found = {p.name: p for p in probe.parse(sh(probe.command, env=env)).python}
    assert found["torch"].version == "2.6.0+cu126"
    assert found["torch"].cuda_version == "12.6"
    assert found["torch"].location == str(site)
    assert found["vllm"].version == "0.8.5"
    assert "torchvision" not in found


def test_names_are_normalised() -> None:
    assert pystack.normalise_name("Flash_Attn") == "flash-attn"
    assert pystack.normalise_name("llama_cpp.python") == "llama-cpp-python"


def test_pip_detect() -> None:
    assert pystack.detect_pip_list("torch==2.6.0\n")
    assert not pystack.detect_pip_list("numpy==2.0\nrequests 2.31\n")


def test_probe_reads_a_virtualenv_on_path_not_activated(tmp_path: Path) -> None:
    """A venv's python3 is a link to the base interpreter (as on the H100 image, whose
    /opt/torch/.venv/bin/python3 resolves to /usr/bin/python3.12): its own site-packages count."""
    venv = tmp_path / "venv"
    site = venv / "lib" / "python3.12" / "site-packages"
    _dist(site, "torch-2.11.0+cu130.dist-info", "torch", "2.11.0+cu130")
    (venv / "bin").mkdir()
    (venv / "bin" / "python3").symlink_to("/usr/bin/env")
    tools = tmp_path / "tools" / "bin"
    tools.mkdir(parents=True)
    (tools / "vllm").write_text("#!/bin/sh\n")
    (tools / "vllm").chmod(0o755)
    _dist(
        tmp_path / "tools" / "lib" / "python3.12" / "site-packages",
        "vllm-0.12.0.dist-info",
        "vllm",
        "0.12.0",
    )
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env["PATH"] = f"{venv / 'bin'}:{tools}:{env['PATH']}"
    (probe,) = pystack.PROBES
    found = {p.name: p for p in probe.parse(sh(probe.command, env=env)).python}
    assert found["torch"].version == "2.11.0+cu130"
    assert found["torch"].location == str(site)
    assert found["vllm"].version == "0.12.0"
