"""Kernel module, Secure Boot and persistenced parsers, and their probes run on this machine."""

from __future__ import annotations

from checks.facts.parsers import kernel
from tests.conftest import sh


def test_dmesg_loading_line_gives_the_module() -> None:
    text = "[  906.5] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  340.65  Tue Dec  2 2014"
    facts = kernel.parse_proc_version(text)
    assert facts.driver.kernel_module_version == "340.65"
    assert facts.driver.kernel_module_flavour == "proprietary"


def test_aarch64_open_module() -> None:
    text = "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  570.86.16  Release Build"
    facts = kernel.parse_proc_version(text)
    assert (facts.driver.kernel_module_version, facts.driver.kernel_module_flavour) == (
        "570.86.16",
        "open",
    )


def test_efivar_other_values_are_unknown() -> None:
    assert kernel.parse_secure_boot("SecureBoot efivar: 7").system.secure_boot is None
    assert kernel.parse_secure_boot("SecureBoot efivar: ").system.secure_boot is None


def test_mokutil_wins_over_efivar() -> None:
    text = "SecureBoot disabled\nSecureBoot efivar: 1\n"
    assert kernel.parse_secure_boot(text).system.secure_boot is False


def test_persistenced_unknown_without_pidof() -> None:
    facts = kernel.parse_persistenced("nvidia-persistenced: unknown (no pidof)")
    assert facts.driver.persistenced_running is None


def test_formats_detect_their_outputs() -> None:
    assert kernel.detect_proc_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.171.04")
    assert kernel.detect_modules("Module                  Size  Used by\nnvidia 1 0\n")
    assert kernel.detect_secure_boot("SecureBoot enabled\n")
    assert not kernel.detect_modules("nvidia driver not loaded")


def test_probes_run_here() -> None:
    for probe in kernel.PROBES:
        text = sh(probe.command)
        facts = probe.parse(text)
        if probe.name == "kernel-module":
            assert "### gpuprov:persistenced" in text
            assert facts.driver.persistenced_running is not None or "no pidof" in text
        else:
            assert facts.system.secure_boot in (None, True, False)
