"""cuda-compat packages and files, and the compat probe run on this machine."""

from __future__ import annotations

import subprocess

from checks.parsers import compat


def test_probe_runs_here() -> None:
    (probe,) = compat.PROBES
    done = subprocess.run(["sh", "-c", probe.command], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    text = done.stdout + done.stderr
    assert "### gpuprov:library-path" in text
    for lib in probe.parse(text).compat:
        assert lib.driver_version is not None


def test_package_without_file_uses_any_compat_dir_on_path() -> None:
    text = (
        "### gpuprov:packages\ncuda-compat-12-8\t570.124.06-1\tii \n### gpuprov:files\n"
        "### gpuprov:library-path\non-path: /usr/local/cuda-12.8/compat -> \n"
    )
    (lib,) = compat.parse_compat_probe(text).compat
    assert (lib.package, lib.path, lib.on_library_path) == ("cuda-compat-12-8", None, True)


def test_detect() -> None:
    assert compat.detect_compat_packages("cuda-compat-12-4\t550.54.15-1\n")
    assert not compat.detect_compat_packages("cuda-compat is great")
