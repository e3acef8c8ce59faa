"""os-release, uname and libc parsers, and the system probe run on this machine."""

from __future__ import annotations

import platform

from checks.facts.parsers import system
from tests.conftest import FIXTURES, sh


def test_probe_runs_here() -> None:
    (probe,) = system.PROBES
    facts = probe.parse(sh(probe.command))
    assert facts.system.kernel_release == platform.release()
    assert facts.system.machine == platform.machine()
    assert facts.system.hostname == platform.node()
    assert facts.system.os_id is not None
    libc, version = platform.libc_ver()
    if libc == "glibc":
        assert facts.system.glibc == version


def test_formats_detect_captures() -> None:
    captures = FIXTURES / "captures" / "system"
    assert system.detect_os_release((captures / "os-release__ci_debian12.txt").read_text())
    assert system.detect_uname((captures / "uname-a__ci_debian12.txt").read_text())
    assert system.detect_libc((captures / "ldd_version__ci_debian12_2.36.txt").read_text())
    assert not system.detect_os_release("ID: 3\nNAME=x\n")


def test_os_release_escapes() -> None:
    facts = system.parse_os_release('ID="rhel"\nVERSION_ID="9.4"\nPRETTY_NAME="Red Hat \\"9\\""\n')
    assert facts.system.os_pretty == 'Red Hat "9"'
