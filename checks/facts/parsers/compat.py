"""CUDA forward-compatibility libcuda: cuda-compat packages, compat/ files, the library path."""

from __future__ import annotations

import re

from checks.facts.model import CompatLibrary, HostFacts
from checks.facts.parsers import Format, sections
from checks.facts.probe import Probe

_PACKAGE = re.compile(
    r"^(?P<name>cuda-compat-\d+-\d+)\t(?P<version>[^\t\n]*)(?:\t(?P<status>[^\t\n]*))?\s*$",
    re.MULTILINE,
)
_DRIVER = re.compile(r"^(\d{3}\.\d{1,3}(?:\.\d{1,3})?)")
_LIBCUDA = re.compile(r"^(?P<dir>/\S*/compat)/libcuda\.so\.(?P<version>\d{3}\.\d+(?:\.\d+)?)\s*$")
# A run of path characters: the longest ".../compat" directory in it is read by _compat_dir, as a
# regex search from every "/" of the run would be quadratic in its length.
_PATH_RUN = re.compile(r"[^\s:=>]+")

COMPAT_COMMAND = r"""PATH=$PATH:/sbin:/usr/sbin
echo '### gpuprov:packages'
if command -v dpkg-query >/dev/null 2>&1; then
  dpkg-query -W -f '${Package}\t${Version}\t${db:Status-Abbrev}\n' 'cuda-compat*' 2>/dev/null
fi
if command -v rpm >/dev/null 2>&1; then
  rpm -qa --qf '%{NAME}\t%{VERSION}-%{RELEASE}\n' 'cuda-compat*' 2>/dev/null
fi
echo '### gpuprov:files'
for f in /usr/local/cuda*/compat/libcuda.so.*; do
  [ -f "$f" ] && [ ! -L "$f" ] && readlink -f "$f"
done | sort -u
echo '### gpuprov:library-path'
{
  grep -h compat /etc/ld.so.conf /etc/ld.so.conf.d/* 2>/dev/null
  echo "$LD_LIBRARY_PATH" | tr ':' '\n'
  ldconfig -p 2>/dev/null | grep 'compat/libcuda' | sed 's/.*=> //; s|/[^/]*$||'
} | grep '^/.*compat' | sort -u | while IFS= read -r d; do
  echo "on-path: $d -> $(readlink -f "$d" 2>/dev/null)"
done
exit 0
"""


def parse_compat_packages(text: str) -> HostFacts:
    """cuda-compat packages from dpkg-query or rpm: "cuda-compat-12-4<TAB>550.54.15-1[<TAB>ii ]"."""
    facts = HostFacts()
    for match in _PACKAGE.finditer(text):
        status = match.group("status")
        if status is not None and (len(status) < 2 or status[1] != "i"):
            continue  # known to dpkg but not installed (removed, config files only)
        driver = _DRIVER.match(match.group("version"))
        if driver is None:
            continue
        facts.compat.append(CompatLibrary(driver_version=driver.group(1), package=match.group(1)))
    return facts


def parse_compat_files(text: str) -> HostFacts:
    """Compat libcuda files, one path a line: /usr/local/cuda-12.4/compat/libcuda.so.550.54.15."""
    facts = HostFacts()
    for line in text.splitlines():
        match = _LIBCUDA.match(line.strip())
        if match is not None:
            path = match.group("dir")
            if all(lib.path != path for lib in facts.compat):
                facts.compat.append(CompatLibrary(path=path, driver_version=match.group("version")))
    return facts


def parse_compat_probe(text: str) -> HostFacts:
    """The compat probe: packages and files, joined by driver version, and the library path."""
    parts = {section.name: section.text for section in sections.split(text)}
    facts = parse_compat_files(parts.get("files", ""))
    for package in parse_compat_packages(parts.get("packages", "")).compat:
        same = [lib for lib in facts.compat if lib.driver_version == package.driver_version]
        if same and same[0].package is None:
            same[0].package = package.package
        else:
            facts.compat.append(package)
    if "library-path" in parts:
        on_path = _compat_dirs(parts["library-path"])
        any_on_path = bool(on_path)
        for lib in facts.compat:
            lib.on_library_path = lib.path in on_path if lib.path else any_on_path
    return facts


def _compat_dirs(text: str) -> set[str]:
    """Every "/.../compat" directory in `text`: from a run's first "/" to its last "/compat" that
    ends the run (before a blank, ":" or the end) or is followed by "/"."""
    found = set()
    for run in _PATH_RUN.finditer(text):
        path = run.group()
        start = path.find("/")
        if start == -1:
            continue
        after = text[run.end() : run.end() + 1]
        ends_run = after in ("", ":") or after.isspace()
        end = path.rfind("/compat")
        while end > start:
            stop = end + len("/compat")
            if path[stop : stop + 1] == "/" or (stop == len(path) and ends_run):
                found.add(path[start:stop])
                break
            end = path.rfind("/compat", start, end)
    return found


def detect_compat_packages(text: str) -> bool:
    return _PACKAGE.search(text) is not None


FORMATS = [Format("cuda-compat-packages", detect_compat_packages, parse_compat_packages)]

PROBES = [Probe("cuda-compat", COMPAT_COMMAND, parse_compat_probe)]
