"""The operating system: os-release, kernel release, machine, hostname and the C library."""

from __future__ import annotations

import re

from checks.facts.model import HostFacts
from checks.facts.parsers import Format, sections
from checks.facts.probe import Probe

# The value runs to the end of the line and is stripped after: "(.*?)\s*$" is quadratic in a run
# of trailing spaces.
_OS_RELEASE = re.compile(r"^([A-Z][A-Z0-9_]*)=(.*)$", re.MULTILINE)
_UNAME_LABELLED = re.compile(r"^(hostname|kernel|machine): (\S+)\s*$", re.MULTILINE)
# `uname -a`: "Linux vm 6.18.44-fc-v769 #1 SMP PREEMPT_DYNAMIC @0 x86_64 GNU/Linux".
_UNAME_A = re.compile(
    r"^Linux (?P<host>\S+) (?P<release>\d+\.(?=\d)\S+) #.* (?P<machine>\S+) GNU/Linux\s*$",
    re.MULTILINE,
)
# "ldd (Debian GLIBC 2.36-9+deb12u14) 2.36", "ldd (GNU libc) 2.39", getconf's "glibc 2.36".
_LDD = re.compile(r"^ldd \(([^()\n]*)\) (\d+\.\d+)[ \t]*$", re.MULTILINE)
_GETCONF = re.compile(r"^glibc (\d+\.\d+)\s*$", re.MULTILINE)

SYSTEM_COMMAND = r"""echo '### gpuprov:os-release'
cat /etc/os-release 2>/dev/null || cat /usr/lib/os-release 2>&1
echo '### gpuprov:uname'
printf 'hostname: %s\nkernel: %s\nmachine: %s\n' "$(uname -n)" "$(uname -r)" "$(uname -m)"
echo '### gpuprov:libc'
ldd --version 2>&1 | head -n 1
getconf GNU_LIBC_VERSION 2>/dev/null
exit 0
"""


def parse_os_release(text: str) -> HostFacts:
    """/etc/os-release: ID, VERSION_ID and PRETTY_NAME."""
    facts = HostFacts()
    values: dict[str, str] = {}
    for key, raw in _OS_RELEASE.findall(text):
        values.setdefault(key, _unquote(raw.rstrip()))
    facts.system.os_id = values.get("ID") or None
    facts.system.os_version = values.get("VERSION_ID") or None
    facts.system.os_pretty = values.get("PRETTY_NAME") or None
    return facts


def _unquote(raw: str) -> str:
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        raw = raw[1:-1]
    return re.sub(r"\\(.)", r"\1", raw)


def parse_uname(text: str) -> HostFacts:
    """The probe's labelled uname fields, or a pasted `uname -a` line."""
    facts = HostFacts()
    labelled = dict(_UNAME_LABELLED.findall(text))
    if labelled:
        facts.system.hostname = labelled.get("hostname")
        facts.system.kernel_release = labelled.get("kernel")
        facts.system.machine = labelled.get("machine")
        return facts
    match = _UNAME_A.search(text)
    if match is not None:
        facts.system.hostname = match.group("host")
        facts.system.kernel_release = match.group("release")
        facts.system.machine = match.group("machine")
    return facts


def parse_libc(text: str) -> HostFacts:
    """glibc's version from `ldd --version` or `getconf GNU_LIBC_VERSION`; musl leaves it None."""
    facts = HostFacts()
    for ldd in _LDD.finditer(text):
        if "GLIBC" in ldd.group(1) or ldd.group(1) == "GNU libc":
            facts.system.glibc = ldd.group(2)
            return facts
    getconf = _GETCONF.search(text)
    facts.system.glibc = getconf.group(1) if getconf else None
    return facts


_SECTIONS = {"os-release": parse_os_release, "uname": parse_uname, "libc": parse_libc}


def parse_system(text: str) -> HostFacts:
    """The system probe: os-release, uname and libc sections."""
    return sections.dispatch(text, _SECTIONS)


def detect_os_release(text: str) -> bool:
    keys = {key for key, _ in _OS_RELEASE.findall(text)}
    return {"ID", "PRETTY_NAME"} <= keys or {"ID", "VERSION_ID"} <= keys


def detect_uname(text: str) -> bool:
    return _UNAME_A.search(text) is not None


def detect_libc(text: str) -> bool:
    return parse_libc(text).system.glibc is not None and _LDD.search(text) is not None


FORMATS = [
    Format("os-release", detect_os_release, parse_os_release),
    Format("uname-a", detect_uname, parse_uname),
    Format("ldd-version", detect_libc, parse_libc),
]

PROBES = [Probe("system", SYSTEM_COMMAND, parse_system)]
