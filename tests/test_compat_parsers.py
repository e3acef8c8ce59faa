"""cuda-compat packages and files, and the compat probe run on this machine."""

from __future__ import annotations

from checks.facts.parsers import compat
from tests.conftest import sh


def test_probe_runs_here() -> None:
    (probe,) = compat.PROBES
    text = sh(probe.command)
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
