"""The NVIDIA kernel module: loaded version and flavour, modules, Secure Boot, persistenced, and
the GPUs its messages name."""

from __future__ import annotations

import re

from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format, sections
from checks.facts.probe import Probe

# "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build ..." (open),
# "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.171.04  ..." (proprietary); dmesg prints
# "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  340.65 ..." for the same module.
_NVRM = re.compile(
    r"NVRM(?: version:|: loading) NVIDIA UNIX (?P<kind>Open Kernel Module for \S+|.*?Kernel Module)"
    r"\s+(?P<version>\d{2,4}\.\d{1,3}(?:\.\d{1,3})?)\b"
)
# The banner is about 120 characters; a longer line is not one, and skipping it keeps the lazy
# ".*?Kernel Module" from rescanning a long line once per "NVRM" in it.
_NVRM_LINE_MAX = 1024
# The kernel's refusal of a userspace driver of another version, over several "NVRM: " lines:
# "NVRM: API mismatch: the client has the version 390.25, but / NVRM: this kernel module has the
# version 390.12." (older), "NVRM: API mismatch: the client 'kwin_wayland' (pid 1005) / NVRM: has
# the version 595.84, but this kernel module has / NVRM: the version 595.80." (newer). Read from
# a bounded window after the first "API mismatch", its "NVRM:" prefixes and line breaks (syslog
# writes them as "#012") removed.
_MISMATCH_START = "NVRM: API mismatch: the client"
_MISMATCH_WINDOW = 600
_MISMATCH = re.compile(
    r"^NVRM: API mismatch: the client(?: '[^']{0,255}')?(?: \(pid \d{1,10}\))?"
    r" has the version (?P<client>\d{2,4}\.\d{1,3}(?:\.\d{1,3})?),"
    r" but this kernel module has the version (?P<module>\d{2,4}\.\d{1,3}(?:\.\d{1,3})?)\."
)
# The kernel names each GPU by its PCI domain, bus and device and by its UUID the first time it
# reports an error for it (RC's "NVRM: GPU at PCI:%04x:%02x:%02x: %s" before its first Xid), in
# dmesg, the journal or syslog, after whatever prefix they put first:
# "[Wed Jul 31 23:14:18 2024] NVRM: GPU at PCI:0000:00:05: GPU-efbdfde9-5798-a6e7-4c46-12518fa15375"
# (akash-network/support#244). The GPU is PCI function 0 of that device.
_GPU_AT_PCI = re.compile(
    r"NVRM: GPU at PCI:([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}): "
    r"(GPU-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})[ \t]*$",
    re.MULTILINE,
)
_PROC_MODULE = re.compile(r"^(\w+) \d+ \d+ \S+ (?:Live|Loading|Unloading)\b", re.MULTILINE)
_LSMOD_HEADER = re.compile(r"^Module\s+Size\s+Used by\s*$", re.MULTILINE)
_LSMOD_LINE = re.compile(r"^(\w+)\s+\d+\s+\d+(?:\s+\S+)?\s*$")
# Values run to the end of the line and are stripped after ("(.*?)\s*$" is quadratic).
_MODINFO = re.compile(r"^(license|signer|version|filename):[ \t]*(.*)$", re.MULTILINE)
_SB_STATE = re.compile(r"^SecureBoot (enabled|disabled)\b", re.MULTILINE)
_SB_EFIVAR = re.compile(r"^SecureBoot efivar: (\d+)\s*$", re.MULTILINE)
_PERSISTENCED = re.compile(r"^nvidia-persistenced: (running|not running)\b", re.MULTILINE)

EFIVAR_SECURE_BOOT = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"

MODULE_COMMAND = r"""echo '### gpuprov:proc-version'
cat /proc/driver/nvidia/version 2>&1
echo '### gpuprov:modules'
cat /proc/modules 2>&1
echo '### gpuprov:modinfo'
PATH=$PATH:/sbin:/usr/sbin
if command -v modinfo >/dev/null 2>&1; then
  for f in license signer version filename; do
    printf '%s: %s\n' "$f" "$(modinfo -F "$f" nvidia 2>&1 | head -n 1)"
  done
fi
echo '### gpuprov:persistenced'
if ! command -v pidof >/dev/null 2>&1; then
  echo 'nvidia-persistenced: unknown (no pidof)'
elif pids=$(pidof nvidia-persistenced 2>/dev/null) && [ -n "$pids" ]; then
  echo "nvidia-persistenced: running $pids"
else
  echo 'nvidia-persistenced: not running'
fi
exit 0
"""

SECURE_BOOT_COMMAND = rf"""PATH=$PATH:/sbin:/usr/sbin
command -v mokutil >/dev/null 2>&1 && mokutil --sb-state 2>&1
f={EFIVAR_SECURE_BOOT}
if [ -r "$f" ]; then
  echo "SecureBoot efivar: $(od -An -t u1 -j 4 -N 1 "$f" | tr -d ' ')"
elif [ ! -d /sys/firmware/efi ]; then
  echo 'no /sys/firmware/efi: legacy BIOS boot or hidden firmware'
fi
exit 0
"""


def _nvrm(text: str) -> re.Match[str] | None:
    """The first NVRM banner line of a sane length."""
    for line in text.split("\n"):
        if "NVRM" in line and len(line) <= _NVRM_LINE_MAX:
            match = _NVRM.search(line)
            if match is not None:
                return match
    return None


# A Jetson's module (Jetson Linux R34 and R35) is numbered as its L4T release, two digits first:
# "NVIDIA UNIX Open Kernel Module for aarch64  35.3.1  Release Build" (nix-community/nixGL#139,
# an Orin NX). A desktop or server driver for aarch64 is numbered NNN.NN[.NN] ("550.54.15"), and
# JetPack 6's module "540.4.0" names no L4T release.
_L4T_MODULE = re.compile(r"3\d\.\d{1,2}\.\d{1,2}")


def parse_proc_version(text: str) -> HostFacts:
    """/proc/driver/nvidia/version (or dmesg's NVRM loading line): module version and flavour,
    and the L4T release a Jetson's module is numbered as."""
    facts = HostFacts()
    match = _nvrm(text)
    if match is not None:
        version, kind = match.group("version"), match.group("kind")
        facts.driver.kernel_module_version = version
        open_module = kind.startswith("Open")
        facts.driver.kernel_module_flavour = "open" if open_module else "proprietary"
        if kind == "Open Kernel Module for aarch64" and _L4T_MODULE.fullmatch(version):
            facts.system.l4t_release = version
    return facts


def _api_mismatch(text: str) -> re.Match[str] | None:
    start = text.find(_MISMATCH_START)
    if start < 0:
        return None
    window = text[start : start + _MISMATCH_WINDOW].replace("#012", " ")  # syslog's line breaks
    words = window.split()
    joined = "NVRM: " + " ".join(w for w in words if w != "NVRM:")
    return _MISMATCH.match(joined)


def parse_api_mismatch(text: str) -> HostFacts:
    """The kernel's "API mismatch" message: the userspace driver's version and the module's."""
    facts = HostFacts()
    match = _api_mismatch(text)
    if match is not None:
        facts.driver.version = match.group("client")
        facts.driver.kernel_module_version = match.group("module")
    return facts


def parse_gpu_at_pci(text: str) -> HostFacts:
    """The kernel's "NVRM: GPU at PCI:..." lines: one GPU, without a name, per bus id."""
    facts = HostFacts()
    seen: set[str] = set()
    for bus, uuid in _GPU_AT_PCI.findall(text):
        bus_id = f"{bus}.0"
        if bus_id.lower() not in seen:
            seen.add(bus_id.lower())
            facts.gpus.append(Gpu(pci_bus_id=bus_id, uuid=uuid))
    return facts


def parse_modules(text: str) -> HostFacts:
    """/proc/modules or `lsmod`: the names of all loaded modules, in order."""
    facts = HostFacts()
    names = _PROC_MODULE.findall(text)
    header = _LSMOD_HEADER.search(text)
    if not names and header is not None:
        lines = text[header.end() :].splitlines()
        names = [m.group(1) for m in map(_LSMOD_LINE.match, lines) if m is not None]
    if names:
        facts.modules.loaded = list(dict.fromkeys(names))
    return facts


def parse_modinfo(text: str) -> HostFacts:
    """`modinfo nvidia` or the labelled `modinfo -F` fields: license, signer, version.

    An unsigned module gives signer "" (known to be unsigned), not None.
    """
    facts = HostFacts()
    fields: dict[str, str] = {}
    for key, value in _MODINFO.findall(text):
        fields.setdefault(key, value.rstrip())
    if any(value.startswith("modinfo:") for value in fields.values()):
        return facts  # "modinfo: ERROR: Module nvidia not found."
    modules = facts.modules
    modules.nvidia_license = fields.get("license") or None
    modules.nvidia_version = fields.get("version") or None
    if "signer" in fields and (modules.nvidia_license or modules.nvidia_version):
        modules.nvidia_signer = fields["signer"]
    return facts


# A pasted `modinfo -F version nvidia` (after a prompt, "$", "#" or zsh's "%", or none) and its
# answer, a driver version alone on a line, after at most a few blank, fence or "Example:" lines
# (a how-to puts the answer in its own fence). Ubuntu's older packages name the module after its
# branch: `modinfo -F version nvidia_352` (al42and/cuda-smi#2).
_MODINFO_F_VERSION = re.compile(
    r"^[$#>%]?[ \t]*modinfo -F version nvidia(?:_\d{3})?[ \t]*$", re.MULTILINE
)
_VERSION_ALONE = re.compile(r"\d{3}\.\d{1,3}(?:\.\d{1,3})?")
_BETWEEN = 6  # lines


def _modinfo_f_version(text: str) -> str | None:
    """The answer under the first `modinfo -F version nvidia` that has one."""
    for m in _MODINFO_F_VERSION.finditer(text):
        pos = m.end() + 1
        for _ in range(_BETWEEN):
            end = text.find("\n", pos, pos + 200)
            line = text[pos : end if end != -1 else pos + 200].strip()
            pos = end + 1
            if _VERSION_ALONE.fullmatch(line):
                return line
            if end == -1 or (line and not line.startswith("```") and line != "Example:"):
                break
    return None


def parse_modinfo_f_version(text: str) -> HostFacts:
    """`modinfo -F version nvidia` pasted with its answer: the module's version."""
    facts = HostFacts()
    facts.modules.nvidia_version = _modinfo_f_version(text)
    return facts


def parse_secure_boot(text: str) -> HostFacts:
    """`mokutil --sb-state`, else the SecureBoot efivar's data byte: system.secure_boot.

    "EFI variables are not supported on this system" and a missing mokutil leave it unknown.
    """
    facts = HostFacts()
    state = _SB_STATE.search(text)
    if state is not None:
        facts.system.secure_boot = state.group(1) == "enabled"
        return facts
    efivar = _SB_EFIVAR.search(text)
    if efivar is not None and efivar.group(1) in ("0", "1"):
        facts.system.secure_boot = efivar.group(1) == "1"
    return facts


def parse_persistenced(text: str) -> HostFacts:
    """The probe's "nvidia-persistenced: running|not running" line."""
    facts = HostFacts()
    match = _PERSISTENCED.search(text)
    if match is not None:
        facts.driver.persistenced_running = match.group(1) == "running"
    return facts


_SECTIONS = {
    "proc-version": parse_proc_version,
    "modules": parse_modules,
    "modinfo": parse_modinfo,
    "persistenced": parse_persistenced,
}


def parse_module_probe(text: str) -> HostFacts:
    """The kernel-module probe: one section per source, each read by its own parser."""
    return sections.dispatch(text, _SECTIONS)


def detect_proc_version(text: str) -> bool:
    return _nvrm(text) is not None


def detect_api_mismatch(text: str) -> bool:
    return _api_mismatch(text) is not None


def detect_gpu_at_pci(text: str) -> bool:
    return _GPU_AT_PCI.search(text) is not None


def detect_modules(text: str) -> bool:
    return _LSMOD_HEADER.search(text) is not None or len(_PROC_MODULE.findall(text)) >= 2


def detect_modinfo(text: str) -> bool:
    return re.search(r"^filename:\s+/\S+/nvidia\.ko", text, re.MULTILINE) is not None


def detect_modinfo_f_version(text: str) -> bool:
    return _modinfo_f_version(text) is not None


def detect_secure_boot(text: str) -> bool:
    return _SB_STATE.search(text) is not None


FORMATS = [
    Format("nvidia-proc-version", detect_proc_version, parse_proc_version),
    Format("nvrm-api-mismatch", detect_api_mismatch, parse_api_mismatch),
    Format("nvrm-gpu-at-pci", detect_gpu_at_pci, parse_gpu_at_pci),
    Format("lsmod", detect_modules, parse_modules),
    Format("modinfo-nvidia", detect_modinfo, parse_modinfo),
    Format("modinfo-f-version", detect_modinfo_f_version, parse_modinfo_f_version),
    Format("mokutil-sb-state", detect_secure_boot, parse_secure_boot),
]

PROBES = [
    Probe("kernel-module", MODULE_COMMAND, parse_module_probe),
    Probe("secure-boot", SECURE_BOOT_COMMAND, parse_secure_boot),
]
