"""The host C/C++ compiler nvcc builds with: GCC's version from `gcc --version` or CMake's log."""

from __future__ import annotations

import re

from checks.facts.model import HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

# gcc/cc/g++ print "<name> (<package build>) <version>" first: "gcc (GCC) 16.1.1 20260501 (Red Hat
# 16.1.1-1)", "cc (Debian 12.2.0-14+deb12u1) 12.2.0"; clang's cc prints "clang version" instead.
_BANNER = re.compile(
    r"^(?:gcc|g\+\+|cc|c\+\+)(?:-\d+)? \([^()\n]*\) (\d+\.\d+(?:\.\d+)?)\b[^\n]*\n"
    r"Copyright \(C\) \d+ Free Software Foundation",
    re.MULTILINE,
)
# CMake's configure log names the C++ compiler, which nvcc uses as its host compiler by default.
_CMAKE_CXX = re.compile(
    r"^-- The CXX compiler identification is GNU (\d+\.\d+(?:\.\d+)?)[ \t]*$", re.MULTILINE
)

GCC_COMMAND = "{ gcc --version || cc --version; } 2>&1 | head -n 2"


def parse_gcc(text: str) -> HostFacts:
    """`gcc --version` / `cc --version` (GNU only), or CMake's CXX compiler identification."""
    facts = HostFacts()
    found = _BANNER.search(text) or _CMAKE_CXX.search(text)
    if found is not None:
        facts.system.gcc_version = found.group(1)
    return facts


def detect_gcc(text: str) -> bool:
    return _BANNER.search(text) is not None or _CMAKE_CXX.search(text) is not None


FORMATS = [Format("gcc", detect_gcc, parse_gcc)]

PROBES = [Probe("gcc", GCC_COMMAND, parse_gcc)]
