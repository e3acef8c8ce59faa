"""Installed packages (`dpkg -l`, `apt list --installed`, `dnf list installed`, `rpm -qa`): driver,
toolkit.

The driver package carries the userspace driver's version (nvidia-384 384.81-0ubuntu1,
nvidia-driver-535 535.183.01-0ubuntu1, Fedora's nvidia-driver.x86_64 2:387.34-1.fc27);
nvidia-container-toolkit the Container Toolkit's; cuda-nvcc-X-Y the toolkit's nvcc (13.0.88, the
number `nvcc --version` prints) and cuda-compat-X-Y the forward-compatibility libcuda's driver.
Only installed packages count: dpkg's "ii" and "hi" (held with `apt-mark hold`, as drivers often
are), apt's "[installed...]", the lines `dnf list installed` (or `yum`) and `rpm -qa` print, and a
package an environment list states with its version ("package nvidia-compute-utils-530 version
530.30.02-0ubuntu1") on a line that words no change to it.
"""

from __future__ import annotations

import re

from checks.facts.model import CompatLibrary, HostFacts, Toolkit
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_DPKG = re.compile(r"^[ih]i[ \t]+([a-z0-9][\w.+-]*?)(?::[\w-]+)?[ \t]+(\S+)[ \t]+\S+", re.MULTILINE)
_APT = re.compile(
    r"^([a-z0-9][\w.+-]*)/\S+[ \t]+(\S+)[ \t]+\S+[ \t]+\[installed[\],]", re.MULTILINE
)
# `dnf list installed "*nvidia*"`: "nvidia-driver.x86_64   2:387.34-1.fc27" and the repository
# (a third column, which a paste may lack). The name is the shortest one before ".<architecture>"
# and a blank, so "kmod-nvidia-4.14.5-300.fc27.x86_64.x86_64" keeps its kernel's "x86_64".
_DNF = re.compile(
    r"^([a-z0-9][\w.+-]*?)\.(?:x86_64|aarch64|ppc64le|i686|noarch)"
    r"[ \t]+(\d\S*)(?:[ \t]+@?\S+)?[ \t]*$",
    re.MULTILINE,
)
_DRIVER_PACKAGE = re.compile(
    r"nvidia-(?:driver-)?\d{3}(?:-open|-server|-server-open)?|libnvidia-compute-\d{3}(?:-server)?"
)
# Unnumbered packages whose version is the userspace driver's: nvidia-driver (negativo17's and
# NVIDIA's CUDA repository's RPM, Debian's metapackage), RPM Fusion's xorg-x11-drv-nvidia.
# NVIDIA's CUDA repository's flavours of the driver package (nvidia-driver-latest-dkms; its -cuda
# and -libs are parts, as nvidia-driver-cuda is) and its cuda-drivers metapackage, which takes the
# driver's version (cuda-drivers-465.19.01-1, Azure/az-hop#269).
_RPM_DRIVER_PACKAGE = re.compile(
    r"nvidia-driver(?:-latest(?:-dkms)?)?|xorg-x11-drv-nvidia|cuda-drivers"
)
# `rpm -qa` (or `rpm -q NAME`): one "name-version-release.arch" a line right below the command,
# never an epoch ("3:"), which dnf's transaction lists of removed packages do print.
_RPM_COMMAND = re.compile(r"(?:^|[\s$#>])rpm -q")
_NEVRA = re.compile(r"([a-z0-9][\w.+-]{0,200})\.(?:x86_64|aarch64|ppc64le|i686|noarch)")
# Ubuntu's other numbered driver packages carry the same version (libnvidia-cfg1-470:amd64
# 470.103.01-0ubuntu0.20.04.1) when the paste lacks the compute or driver row; a transitional one
# carries another branch's (libnvidia-common-455 460.91.03), so the branch must match the version.
_BRANCH_PACKAGE = re.compile(
    r"(?:libnvidia-[a-z0-9]{1,12}|nvidia-utils|nvidia-compute-utils)-(\d{3})(?:-server)?"
)
_DRIVER_VERSION = re.compile(r"(?:\d+:)?(\d{3}\.\d{1,3}(?:\.\d{1,3})?)(?![\d.])")
_TOOLKIT_VERSION = re.compile(r"(?:\d+:)?(\d+\.\d+\.\d+)")
# A package stated in words, as an environment list names what is installed
# (NVIDIA/nvidia-container-toolkit#203): "* OS/.deb package nvidia-compute-utils-530 version
# 530.30.02-0ubuntu1", "* OS/.deb package nvidia-container-toolkit 1.14.3-1". A line that words a
# change (install, upgrade, remove, a requirement) states no installed package.
_STATED = re.compile(
    r"\bpackage[ \t]{1,4}([a-z0-9][\w.+-]{1,80})(?::[\w-]{1,16})?[ \t]{1,4}(?:version[ \t]{1,4})?"
    r"(\d[\w.:+~-]{0,80})",
    re.IGNORECASE,
)
_CHANGE = re.compile(
    r"\b(?:install(?!ed\b)|upgrad|updat|downgrad|remov|purg|uninstall|requir|need|recommend"
    r"|instead|should|latest)",
    re.IGNORECASE,
)
# The toolkit's compiler and forward-compatibility packages: "cuda-nvcc-13-0 13.0.88-1" (dpkg),
# "cuda-nvcc-12-8.x86_64 12.8.93-1" (dnf), "cuda-compat-13-0 580.95.05-0ubuntu1".
_NVCC_PACKAGE = re.compile(r"cuda-nvcc-(\d+)-(\d+)")
_COMPAT_PACKAGE = re.compile(r"cuda-compat-\d+-\d+")


def _rpm_qa(text: str) -> list[tuple[str, str]]:
    """(name, version) of the lines right below each `rpm -q` command: the last two "-" parts of
    each are its version and release."""
    found = []
    below = False
    for line in text.split("\n"):
        nevra = _NEVRA.fullmatch(line.strip()) if below else None
        below = nevra is not None or bool(_RPM_COMMAND.search(line))
        parts = nevra.group(1).rsplit("-", 2) if nevra else []
        if len(parts) == 3 and parts[0] and parts[1][:1].isdigit():
            found.append((parts[0], parts[1]))
    return found


def _stated(text: str) -> list[tuple[str, str]]:
    """(name, version) of each package a line states, on a line that words no change to it."""
    return [
        (found.group(1), found.group(2))
        for line in text.split("\n")
        if "package" in line.lower() and _CHANGE.search(line) is None
        for found in _STATED.finditer(line)
    ]


def _installed(text: str) -> list[tuple[str, str]]:
    found = _DPKG.findall(text) + _APT.findall(text) + _DNF.findall(text)
    return found + _rpm_qa(text) + _stated(text)


def _driver_package(name: str) -> bool:
    return bool(_DRIVER_PACKAGE.fullmatch(name) or _RPM_DRIVER_PACKAGE.fullmatch(name))


def _branch_version(installed: list[tuple[str, str]]) -> str | None:
    """The one driver version that numbered packages of its own branch agree on, or None."""
    found: set[str] = set()
    for name, version in installed:
        branch = _BRANCH_PACKAGE.fullmatch(name)
        driver = _DRIVER_VERSION.match(version) if branch else None
        if branch and driver and driver.group(1).split(".")[0] == branch.group(1):
            found.add(driver.group(1))
    return found.pop() if len(found) == 1 else None


def parse_packages(text: str) -> HostFacts:
    """The driver's version from its package, the Container Toolkit's, nvcc's and cuda-compat's."""
    facts = HostFacts()
    installed = _installed(text)
    for name, version in installed:
        if _driver_package(name) and facts.driver.version is None:
            driver = _DRIVER_VERSION.match(version)
            facts.driver.version = driver.group(1) if driver else None
        elif name == "nvidia-container-toolkit" and facts.containers.toolkit_version is None:
            toolkit = _TOOLKIT_VERSION.match(version)
            facts.containers.toolkit_version = toolkit.group(1) if toolkit else None
        elif (nvcc := _NVCC_PACKAGE.fullmatch(name)) and (v := _TOOLKIT_VERSION.match(version)):
            release = f"{nvcc.group(1)}.{nvcc.group(2)}"
            if v.group(1).startswith(release + "."):
                facts.toolkits.append(
                    Toolkit(version=v.group(1), release=release, source=f"package {name}")
                )
        elif _COMPAT_PACKAGE.fullmatch(name) and (v := _DRIVER_VERSION.match(version)):
            facts.compat.append(CompatLibrary(driver_version=v.group(1), package=name))
    facts.driver.version = facts.driver.version or _branch_version(installed)
    return facts


def detect_packages(text: str) -> bool:
    installed = _installed(text)
    return (
        any(
            _driver_package(name)
            or name == "nvidia-container-toolkit"
            or _NVCC_PACKAGE.fullmatch(name)
            or _COMPAT_PACKAGE.fullmatch(name)
            for name, _ in installed
        )
        or _branch_version(installed) is not None
    )


FORMATS = [Format("dpkg -l / apt list / dnf list / rpm -qa", detect_packages, parse_packages)]

# No probe: the driver and toolkit probes ask the tools themselves.
PROBES: list[Probe] = []
