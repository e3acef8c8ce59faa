"""nvidia-smi in all its output forms: the table, --query-gpu CSV, -q, -q -x, -L, --version, errors.

Every parser takes text that may be a whole issue paste (markdown fences, "> " quotes, other logs
around it) and returns a HostFacts fragment with only what the output shows. None of them raises.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator

from checks.facts import nvml
from checks.facts.gpus import NAME_START, cut_capability, lookup, normalise_architecture
from checks.facts.model import Gpu, HostFacts, merge
from checks.facts.parsers import Format
from checks.facts.probe import Probe

# --- shared helpers ------------------------------------------------------------------------------

_QUOTE = re.compile(r"^[ \t]*(?:>[ \t]?)+")
_BUS_ID = re.compile(r"\b((?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\b")
# (?<!\d): a search never restarts inside a run of digits, which would make it quadratic.
_VERSION = re.compile(r"(?<!\d)\d+(?:\.\d+)+")
_UNKNOWN = {
    "",
    "n/a",
    "[n/a]",
    "not supported",
    "[not supported]",
    "unknown error",
    "[unknown error]",
    "insufficient permissions",
    "[insufficient permissions]",
    "requested functionality has been deprecated",
    "[requested functionality has been deprecated]",
}


def _lines(text: str) -> list[str]:
    """Lines with carriage returns and markdown quote prefixes removed."""
    return [_QUOTE.sub("", line.rstrip("\r")) for line in text.splitlines()]


def _clean(value: str | None) -> str | None:
    """A value, or None for the placeholders nvidia-smi prints when it does not know."""
    if value is None:
        return None
    value = value.strip()
    return None if value.lower() in _UNKNOWN else value


def _name(value: str | None) -> str | None:
    """A GPU name, or None for a placeholder in its place: "ERR!" in the table's name cell
    (NVIDIA/gpu-operator#559), "[Unknown Error]", "[GPU is lost]" or "N/A" elsewhere."""
    value = _clean(value)
    if value is None or value.upper() == "ERR!" or value.startswith("["):
        return None
    return value


def _version(value: str | None) -> str | None:
    """The first dotted version in `value` ("610.43.02 [Deprecated; ...]" -> "610.43.02")."""
    value = _clean(value)
    if value is None:
        return None
    match = _VERSION.search(value)
    return match.group(0) if match else None


def _int(value: str | None) -> int | None:
    value = _clean(value)
    if value is None:
        return None
    match = re.match(r"\d+", value)
    return int(match.group(0)) if match else None


def _mib(value: str | None) -> int | None:
    """A memory size in MiB from "32768 MiB", "32768" (nounits) or "80 GiB"."""
    value = _clean(value)
    if value is None:
        return None
    match = re.match(r"(\d+)\s*([KMGT]i?B)?", value, re.I)
    if match is None:
        return None
    number = int(match.group(1))
    unit = (match.group(2) or "MiB").upper()
    if unit.startswith("G"):
        return number * 1024
    if unit.startswith("K"):
        return number // 1024
    return number


def _mode(value: str | None) -> str | None:
    """Enabled / Disabled from the spellings nvidia-smi uses (On, Off, Enabled, 1, ...)."""
    value = _clean(value)
    if value is None:
        return None
    word = value.lower()
    if word in ("on", "enabled", "enable", "1", "yes"):
        return "Enabled"
    if word in ("off", "disabled", "disable", "0", "no"):
        return "Disabled"
    return None


def _bus_id(value: str | None) -> str | None:
    value = _clean(value)
    if value is None:
        return None
    match = _BUS_ID.search(value)
    return match.group(1) if match else None


def _uuid(value: str | None) -> str | None:
    value = _clean(value)
    if value is None:
        return None
    match = re.search(r"GPU-[0-9A-Fa-f-]{8,}", value)
    return match.group(0) if match else None


def _safe(parse: Callable[[str], HostFacts]) -> Callable[[str], HostFacts]:
    """A parser that returns an empty fragment instead of raising on input it cannot read."""

    def wrapped(text: str) -> HostFacts:
        try:
            return parse(text if isinstance(text, str) else "")
        except Exception:
            return HostFacts()

    wrapped.__name__ = parse.__name__
    wrapped.__doc__ = parse.__doc__
    return wrapped


# --- the default table ---------------------------------------------------------------------------

# The header's fields typed on one line may be split by ";" ("NVIDIA-SMI 535.54.03; Driver
# Version: 535.54.03; CUDA Version: 12.2", wookayin/gpustat#157).
_TABLE_HEADER = re.compile(
    r"NVIDIA-SMI\s+(?P<smi>\S+)\s+(?:Driver|KMD) Version:\s*(?P<driver>[\w.-]+)"
    r"(?:;?\s+CUDA(?: UMD)? Version:\s*(?P<cuda>[\w.-]+))?"
)
# An e-mail reply wraps the header's long line before its last field (NVIDIA/aerial-framework#6):
# "| NVIDIA-SMI 580.95.05   Driver Version: 580.95.05      CUDA" / "Version: 13.0     |". The
# field's words are read across the break only right after a header line that ends in them.
_WRAPPED_CUDA = re.compile(r"[ \t]CUDA(?: UMD)?[ \t]*$")
_CUDA_WRAPPED = re.compile(r"^[ \t]*(?:UMD[ \t])?Version:[ \t]*(\d{1,2}\.\d{1,2})[ \t]*\|")
_TABLE_PM = ("On", "Off", "WDDM", "TCC", "MCDM", "N/A")
_TABLE_BUS = re.compile(r"(?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]")
# A bus id cut short by hand before pasting ("00000000: Off", NVIDIA/DCGM#152): the row is still
# a GPU row, its bus id unknown.
_TABLE_BUS_CUT = re.compile(r"[0-9A-Fa-f]{4,8}:(?:[0-9A-Fa-f]{1,2}(?::[0-9A-Fa-f]{0,2})?)?")
_TABLE_DISP = ("On", "Off", "N/A")
_TABLE_MEMORY = re.compile(r"(?<!\d)(\d+)\s*MiB\s*/\s*(\d+)\s*MiB")
_TABLE_MIG = re.compile(r"^\|[\s|]*\|\s*(Enabled|Disabled|N/A)\s*\|\s*$")
_TABLE_SMI = re.compile(r"NVIDIA-SMI\s+\d+\.\d+")
_TABLE_COLUMNS = re.compile(r"^\|\s*GPU\s+Name\s+.*Bus-Id", re.M)
# The header's line retyped with the GPU's name alone on the next line, as a name cell reads
# (" NVIDIA A100-PCIE-40GB", NVIDIA/nvidia-container-toolkit#115): words that open with a capital
# or a digit, or "with" ("GeForce GTX 1080 with Max-Q Design"); a sentence is no name.
_HEADER_NAME = re.compile(rf"{NAME_START}(?: (?:[A-Z0-9][\w-]*|with)){{1,8}}")


def _table_row(line: str) -> tuple[int, str, str, str] | None:
    """(index, name, persistence mode, bus id) of a GPU row: "| 0  NAME  On | BUS  Off |".

    Read cell by cell: a pattern with the name between two runs of spaces backtracks cubically
    on a long row that almost matches.
    """
    cells = line.strip().split("|", 3)
    if len(cells) < 4 or cells[0]:
        return None
    first = cells[1].split()
    second = cells[2].split()
    if len(first) < 2 or not first[0].isdecimal() or first[-1] not in _TABLE_PM:
        return None
    if len(second) != 2:
        return None
    bus = second[0]
    if second == ["N/A", "N/A"]:
        bus = ""  # Jetson's integrated GPU ("Orin (nvgpu)") has no PCI bus id
    elif _TABLE_BUS.fullmatch(bus) is None:
        if second[1] not in _TABLE_DISP or _TABLE_BUS_CUT.fullmatch(bus) is None:
            return None
        bus = ""
    between = cells[1].strip()[len(first[0]) : -len(first[-1])]
    if len(between) < 2:
        return None  # "0 On": no name between the blanks around it
    return int(first[0]), between.strip(), first[-1], bus


_BUS_PREFIX = re.compile(r"[0-9A-Fa-f]{1,8}(?::[0-9A-Fa-f]{0,2}){0,2}(?:\.[0-9A-Fa-f]?)?")


def _cut_row(lines: list[str]) -> tuple[int, str, str, str] | None:
    """The GPU row of a paste that ends inside that row's bus id ("|   0  NAME  WDDM  |   0000000",
    EricLBuehler/mistral.rs#1099): read only as the paste's last line (a closing fence aside)."""
    text = [line for line in lines if line.strip() and not line.strip().startswith(_FENCES)]
    if not text:
        return None
    cells = text[-1].strip().split("|")
    if len(cells) != 3 or _BUS_PREFIX.fullmatch(cells[2].strip()) is None:
        return None
    return _table_row(f"{cells[0]}|{cells[1]}| 00:00.0 N/A |")


def _table_name(raw: str) -> str | None:
    name = raw.rstrip()
    for ellipsis in ("...", "…"):
        if name.endswith(ellipsis):
            name = name[: -len(ellipsis)]
            break
    return _name(name)


def _table_gpu(index: int, raw: str, pm: str, bus: str) -> Gpu:
    """A GPU row's GPU; a name the table cut short ("GeForce RTX 208...") carries the compute
    capability every catalogue model it can be shares."""
    name = _table_name(raw)
    cut = name is not None and raw.rstrip().endswith(("...", "…"))
    return Gpu(
        index=index,
        name=name,
        pci_bus_id=bus or None,
        persistence_mode=_mode(pm),
        compute_capability=cut_capability(name) if cut and name else None,
    )


@_safe
def parse_table(text: str) -> HostFacts:
    """The default `nvidia-smi` table: driver and CUDA from the header, one Gpu per GPU row; with
    no row, a catalogued GPU's name alone on the line after the header."""
    facts = HostFacts()
    lines = _lines(text)
    shows_mig = any("MIG M." in line for line in lines)
    current: Gpu | None = None
    named: list[str] = []  # names alone on the line after a header
    after_header = False
    for i, line in enumerate(lines):
        header = _TABLE_HEADER.search(line)
        if after_header and header is None and _header_name(line):
            named.append(line.strip())
        after_header = header is not None
        if header is not None:
            facts.driver.version = facts.driver.version or _version(header.group("driver"))
            cuda = header.group("cuda") or _wrapped_cuda(line, lines[i + 1 : i + 2])
            facts.driver.cuda_version = facts.driver.cuda_version or _version(cuda)
            continue
        row = _table_row(line)
        if row is not None:
            current = _table_gpu(*row)
            facts.gpus.append(current)
            continue
        if current is None:
            continue
        stripped = line.strip()
        if not stripped.startswith("|") or "Processes:" in stripped:
            current = None
            continue
        memory = _TABLE_MEMORY.search(stripped)
        if memory is not None and current.memory_total_mib is None:
            current.memory_total_mib = int(memory.group(2))
            continue
        mig = _TABLE_MIG.match(stripped)
        if mig is not None and shows_mig and current.memory_total_mib is not None:
            current.mig_mode = _mode(mig.group(1))
    cut = _cut_row(lines) if any(_TABLE_COLUMNS.match(line) for line in lines) else None
    if cut is not None:
        facts.gpus.append(_table_gpu(cut[0], cut[1], cut[2], ""))
    if not facts.gpus and named:
        facts.gpus = [Gpu(name=named[0])]
    return facts


def _wrapped_cuda(line: str, after: list[str]) -> str | None:
    """The CUDA version on the line after a header line a mail wrap cut after "CUDA"."""
    if not after or _WRAPPED_CUDA.search(line) is None:
        return None
    wrapped = _CUDA_WRAPPED.match(after[0])
    return wrapped.group(1) if wrapped else None


def _header_name(line: str) -> bool:
    """Whether a line is a GPU's name alone, one the catalogue knows."""
    name = line.strip()
    return _HEADER_NAME.fullmatch(name) is not None and lookup(name) is not None


# --- --query-gpu CSV -----------------------------------------------------------------------------

PROBE_FIELDS = (
    "index",
    "name",
    "pci.bus_id",
    "uuid",
    "serial",
    "compute_cap",
    "memory.total",
    "driver_version",
    "persistence_mode",
    "mig.mode.current",
)
PROBE_FIELDS_OLD = tuple(f for f in PROBE_FIELDS if f != "compute_cap")

# Field aliases nvidia-smi accepts, mapped to one name.
_ALIASES = {
    "gpu_name": "name",
    "gpu_bus_id": "pci.bus_id",
    "gpu_uuid": "uuid",
    "gpu_serial": "serial",
    "kmd_version": "driver_version",
}
_GPU_FIELDS = {"index", "name", "pci.bus_id", "uuid", "serial", "compute_cap", "memory.total"}
_FIELD = re.compile(r"^[a-z_][\w.]*$", re.I)
_QUERY_GPU = re.compile(r"--query-gpu=([\w.,]+)")
# A whole run of [\w-] before "=": starting only where a run starts keeps the search linear.
_OPTION_RUN = re.compile(r"(?<![\w-])([\w-]+)=")


def _other_query(line: str) -> bool:
    """Whether `line` holds another query option ("--query-compute-apps=pid,...")."""
    for run in _OPTION_RUN.findall(line):
        start = run.find("--query-")
        while start != -1:
            after = start + len("--query-")
            if after < len(run) and not run.startswith("gpu", after):
                return True
            start = run.find("--query-", start + 1)
    return False


def _drop_unit(header: str) -> str:
    """A CSV header without its trailing "[unit]": "memory.total [MiB]" -> "memory.total"."""
    text = header.strip()
    if not text.endswith("]"):
        return text
    opening = text.find("[", text.rfind("]", 0, len(text) - 1) + 1)
    return text[:opening].rstrip() if opening != -1 else text


def _field(header: str) -> str:
    name = _drop_unit(header).lower()
    return _ALIASES.get(name, name)


def _csv_header(line: str) -> list[str] | None:
    """The field names if `line` is a --query-gpu CSV header, else None."""
    if "," not in line:
        return None
    raw = [_drop_unit(part) for part in line.split(",")]
    if not all(_FIELD.match(part) for part in raw):
        return None
    fields = [_field(part) for part in raw]
    if not _GPU_FIELDS.intersection(fields) or "pid" in fields:
        return None
    if any(f.startswith(("retired_pages.", "remapped_rows.address")) for f in fields):
        return None
    return fields


def _csv_row(fields: list[str], values: list[str], strict: bool) -> Gpu | None:
    row = dict(zip(fields, (v.strip() for v in values), strict=False))
    index = _int(row.get("index"))
    bus = _bus_id(row.get("pci.bus_id"))
    if "index" in row and index is None and _clean(row["index"]) is not None:
        return None
    if "pci.bus_id" in row and bus is None and _clean(row["pci.bus_id"]) is not None:
        return None
    if strict and (index is None or bus is None):
        return None
    cc = _clean(row.get("compute_cap"))
    return Gpu(
        index=index,
        name=_name(row.get("name")),
        pci_bus_id=bus,
        uuid=_uuid(row.get("uuid")),
        serial=_clean(row.get("serial")),
        compute_capability=cc if cc and re.fullmatch(r"\d+\.\d+", cc) else None,
        memory_total_mib=_mib(row.get("memory.total")),
        persistence_mode=_mode(row.get("persistence_mode")),
        mig_mode=_mode(row.get("mig.mode.current")),
    )


@_safe
def parse_query_csv(text: str) -> HostFacts:
    """`nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`, with or without header.

    Without a header the field order comes from a `--query-gpu=` command line in the text, or
    else from this module's probe (with or without compute_cap, told apart by the column count).
    """
    facts = HostFacts()
    fields: list[str] | None = None
    ordinal = 0  # rows come in GPU index order; a row with nothing else to name it gets its place
    for line in _lines(text):
        stripped = line.strip()
        if not stripped:
            continue
        command = _QUERY_GPU.search(stripped)
        if command is not None:
            fields = [_field(f) for f in command.group(1).split(",") if f]
            ordinal = 0 if _SELECTED_GPUS.search(stripped) is None else -1
            continue
        if _other_query(stripped):
            fields = None
            continue
        header = _csv_header(stripped)
        if header is not None:
            fields = header
            continue
        if fields is not None and len(fields) == 1 and "," not in stripped:
            if _field(stripped) == fields[0]:
                continue  # the one-column header
            if not _single_value(fields[0], stripped):
                fields = None  # the output ended
                continue
            values = [stripped]
        else:
            values = stripped.split(",") if "," in stripped else []
        use, strict = fields, False
        if use is None or len(use) != len(values):
            fields = None
            if len(values) == len(PROBE_FIELDS):
                use, strict = list(PROBE_FIELDS), True
            elif len(values) == len(PROBE_FIELDS_OLD):
                use, strict = list(PROBE_FIELDS_OLD), True
            else:
                continue
        gpu = _csv_row(use, values, strict)
        if gpu is None:
            continue
        row = dict(zip(use, values, strict=False))
        facts.driver.version = facts.driver.version or _version(row.get("driver_version"))
        if any(v is not None for v in (gpu.index, gpu.name, gpu.pci_bus_id, gpu.uuid)):
            facts.gpus.append(gpu)
        elif ordinal >= 0 and gpu.compute_capability is not None:
            gpu.index = ordinal
            facts.gpus.append(gpu)
        ordinal += 1 if ordinal >= 0 else 0
    return facts


# "--id=0", "-i 0,1": the rows are of the GPUs named, not GPUs 0, 1, ... in order.
_SELECTED_GPUS = re.compile(r"(?<![\w-])(?:--id[= ]|-i[= ]?\d)")
# What one value of a one-column query looks like, for the fields with a shape of their own.
_SHAPES = {
    "compute_cap": re.compile(r"\d{1,2}\.\d"),
    "driver_version": re.compile(r"\d{2,4}\.\d{1,3}(?:\.\d{1,3})?"),
    "index": re.compile(r"\d{1,4}"),
    "uuid": re.compile(r"GPU-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}"),
}


def _single_value(field: str, value: str) -> bool:
    """Whether `value` is a value of a one-column `--query-gpu=FIELD` output."""
    shape = _SHAPES.get(field)
    return shape is not None and shape.fullmatch(value) is not None


# --- nvidia-smi -q -------------------------------------------------------------------------------

_Q_GPU = re.compile(
    r"^GPU\s+((?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$"
)


def _q_line(line: str) -> tuple[str, str, str | None] | None:
    """(indent, key, value) of a "  key : value" line; value is None without a colon.

    Read with str methods: "(key)\\s*(: value)?$" is quadratic in a long run of spaces.
    """
    rest = line.lstrip()
    indent = line[: len(line) - len(rest)]
    colon = rest.find(":")
    if colon == 0 or not rest:
        if not indent:
            return None
        # The key takes the indent's last character, as a regex's backtracking would.
        return indent[:-1], indent[-1], rest[1:].lstrip() if rest else None
    if colon == -1:
        return indent, rest.rstrip(), None
    return indent, rest[:colon].rstrip(), rest[colon + 1 :].lstrip()


def _q_entries(text: str) -> Iterator[tuple[tuple[str, ...], str | None]]:
    """(path, value) for each "key : value" line, the path built from the indentation."""
    stack: list[tuple[int, str]] = []
    for line in _lines(text):
        if not line.strip() or line.strip().startswith("="):
            continue
        gpu = _Q_GPU.match(line.strip())
        entry = _q_line(line)
        if entry is None:
            continue
        indent = len(entry[0].expandtabs(4))
        key = gpu.group(0) if gpu else entry[1].strip()
        value = None if gpu else entry[2]
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = (*(name for _, name in stack), key)
        yield path, value
        if value is None or not value.strip():
            stack.append((indent, key))


@_safe
def parse_query_text(text: str) -> HostFacts:
    """`nvidia-smi -q`: versions from the top, then one Gpu per "GPU <bus id>" block."""
    facts = HostFacts()
    kmd: str | None = None
    umd: str | None = None
    gpu: Gpu | None = None
    for path, value in _q_entries(text):
        key = path[-1]
        if len(path) == 1:
            bus = _Q_GPU.match(key)
            if bus is not None:
                gpu = Gpu(pci_bus_id=bus.group(1))
                facts.gpus.append(gpu)
                continue
            if key == "Driver Version":
                facts.driver.version = facts.driver.version or _version(value)
            elif key == "CUDA Version":
                facts.driver.cuda_version = facts.driver.cuda_version or _version(value)
            elif key == "KMD Version":
                kmd = _version(value)
            elif key == "CUDA UMD Version":
                umd = _version(value)
            continue
        if gpu is None or len(path) < 2 or not _Q_GPU.match(path[0]):
            continue
        field = path[1:]
        if field == ("Product Name",):
            gpu.name = _name(value)
        elif field == ("Product Brand",):
            gpu.brand = _clean(value)
        elif field == ("Product Architecture",):
            gpu.architecture = normalise_architecture(value)
        elif field == ("Persistence Mode",):
            gpu.persistence_mode = _mode(value)
        elif field == ("MIG Mode", "Current"):
            gpu.mig_mode = _mode(value)
        elif field == ("Serial Number",):
            gpu.serial = _clean(value)
        elif field == ("GPU UUID",):
            gpu.uuid = _uuid(value)
        elif field == ("Minor Number",):
            gpu.index = _int(value)
        elif field == ("PCI", "Bus Id"):
            gpu.pci_bus_id = _bus_id(value) or gpu.pci_bus_id
        elif field == ("FB Memory Usage", "Total"):
            gpu.memory_total_mib = _mib(value)
    facts.driver.version = kmd or facts.driver.version
    facts.driver.cuda_version = umd or facts.driver.cuda_version
    return facts


# `nvidia-smi -q` piped through grep: the lines it keeps, without the NVSMI LOG banner or the
# "GPU <bus id>" headers (NVIDIA/mig-parted#120):
#     $ sudo nvidia-smi -q | grep -E "Product Name|Device Id"
#         Product Name                          : NVIDIA H200
#             Device Id                         : 0x233510DE
# Read only right below the command: each "Product Name" at the least indent starts a GPU (a
# vGPU guest's licensed product has one deeper), "Device Id" is its PCI vendor and device id.
_GREP_STAGES = ("grep", "egrep", "head", "tail")
_DEVICE_ID = re.compile(r"0x([0-9A-Fa-f]{4})10[dD][eE]")


def _stages(line: str) -> list[str]:
    """The stages of a shell pipeline, split at each "|" outside quotes."""
    stages, start, quote = [], 0, ""
    for i, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "|":
            stages.append(line[start:i])
            start = i + 1
    return [*stages, line[start:]]


def _q_grep_command(line: str) -> bool:
    """Whether `line` runs `nvidia-smi -q` (or -a) at a prompt through grep and nothing that
    rewrites lines."""
    stages = [stage.split() for stage in _stages(line)]
    if len(stages) < 2 or not all(stages):
        return False
    smi = stages[0]
    ends = ("nvidia-smi", "nvidia-smi.exe")
    at = next((i for i, word in enumerate(smi) if word.endswith(ends)), -1)
    if at < 0 or not any(word in ("-q", "--query", "-a") for word in smi[at + 1 :]):
        return False
    if at and smi[at - 1] != "sudo" and not smi[at - 1].endswith(("$", "#", ">")):
        return False  # a command named in a sentence, not one run at a prompt
    return stages[1][0] in ("grep", "egrep") and all(s[0] in _GREP_STAGES for s in stages[2:])


def _q_grep_blocks(text: str) -> list[list[str]]:
    """The "key : value" lines right below each grep'd `nvidia-smi -q` command."""
    blocks: list[list[str]] = []
    lines = _lines(text)
    for i, line in enumerate(lines):
        if "nvidia-smi" not in line or not _q_grep_command(line):
            continue
        block: list[str] = []
        for below in lines[i + 1 :]:
            if not below.strip():
                if block:  # grep's lines run together; a blank line after them ends them
                    break
                continue
            entry = _q_line(below)
            if entry is None or entry[2] is None or not entry[2].strip():
                break
            block.append(below)
        blocks.append(block)
    return blocks


@_safe
def parse_query_grep(text: str) -> HostFacts:
    """The GPUs, their PCI device ids, the driver and its CUDA in grep'd `nvidia-smi -q` lines."""
    facts = HostFacts()
    for block in _q_grep_blocks(text):
        entries = [entry for entry in map(_q_line, block) if entry is not None]
        names = [len(e[0].expandtabs(4)) for e in entries if e[1].strip() == "Product Name"]
        gpu: Gpu | None = None
        for indent, key, value in entries:
            key = key.strip()
            if key == "Product Name" and len(indent.expandtabs(4)) == min(names):
                gpu = Gpu(name=_name(value))
                facts.gpus.append(gpu)
            elif key == "Device Id" and gpu is not None and gpu.pci_device_id is None:
                found = _DEVICE_ID.fullmatch((value or "").strip())
                gpu.pci_device_id = f"10de:{found.group(1).lower()}" if found else None
            elif key == "Driver Version" and not indent:
                facts.driver.version = facts.driver.version or _version(value)
            elif key == "CUDA Version" and not indent:
                facts.driver.cuda_version = facts.driver.cuda_version or _version(value)
        if facts.gpus or facts.driver.version:
            break
    return facts


# The head of `nvidia-smi -q` (or -a) alone, cut before its GPUs, without the NVSMI LOG banner
# (NVIDIA/nvidia-docker#578, under an issue form's "Driver information from `nvidia-smi -a`"):
#     Timestamp                           : Sun Dec 17 14:56:13 2017
#     Driver Version                      : 384.98
# Read only as -q prints it: the padded keys, the timestamp as ctime() writes it, the driver right
# below it and its CUDA on the next line where it shows one.
_Q_HEAD = re.compile(
    r"^Timestamp {2,60}: [A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}[ \t]*\n"
    r"Driver Version {2,60}: (\d{3}\.\d{1,3}(?:\.\d{1,3})?)[ \t]*$"
    r"(?:\nCUDA Version {2,60}: (\d{1,2}\.\d{1,2})[ \t]*$)?",
    re.MULTILINE,
)


@_safe
def parse_query_head(text: str) -> HostFacts:
    """The driver and its CUDA from the head of `nvidia-smi -q` cut before its GPUs."""
    facts = HostFacts()
    found = _Q_HEAD.search(text)
    if found is not None:
        facts.driver.version, facts.driver.cuda_version = found.group(1), found.group(2)
    return facts


def _detect_query_head(text: str) -> bool:
    return not _detect_query_text(text) and _Q_HEAD.search(text) is not None


# --- nvidia-smi -q -x ----------------------------------------------------------------------------

_XML_START = re.compile(r"<\?xml[^<>]*>|<!DOCTYPE nvidia_smi_log|<nvidia_smi_log\b")


def _xml_gpu(element: ET.Element) -> Gpu:
    def text(path: str) -> str | None:
        return _clean(element.findtext(path))

    cc = text("compute_cap") or text("cuda_compute_capability")
    return Gpu(
        index=_int(text("minor_number")),
        name=_name(text("product_name")),
        pci_bus_id=_bus_id(text("pci/pci_bus_id")) or _bus_id(element.get("id")),
        uuid=_uuid(text("uuid")),
        serial=text("serial"),
        compute_capability=cc if cc and re.fullmatch(r"\d+\.\d+", cc) else None,
        memory_total_mib=_mib(text("fb_memory_usage/total")),
        brand=text("product_brand"),
        architecture=normalise_architecture(text("product_architecture")),
        mig_mode=_mode(text("mig_mode/current_mig")),
        persistence_mode=_mode(text("persistence_mode")),
    )


def _xml_tag(chunk: str, tag: str) -> str | None:
    match = re.search(rf"<{tag}>([^<]*)</{tag}>", chunk)
    return _clean(match.group(1)) if match else None


def _xml_by_regex(text: str) -> HostFacts:
    """What a truncated or broken XML still shows, read tag by tag."""
    facts = HostFacts()
    head = text.split("<gpu ", 1)[0]
    facts.driver.version = _version(
        _xml_tag(head, "kmd_version") or _xml_tag(head, "driver_version")
    )
    facts.driver.cuda_version = _version(
        _xml_tag(head, "cuda_umd_version") or _xml_tag(head, "cuda_version")
    )
    for match in re.finditer(
        r"<gpu\s+id=\"([^\"]*)\"\s*>(.*?)(?=<gpu\s+id=|</nvidia_smi_log>|$)", text, re.S
    ):
        chunk = re.sub(r"<mig_devices>.*?(?:</mig_devices>|$)", "", match.group(2), flags=re.S)
        memory = re.search(r"<fb_memory_usage>\s*<total>([^<]*)</total>", chunk)
        mig = re.search(r"<mig_mode>\s*<current_mig>([^<]*)</current_mig>", chunk)
        cc = _xml_tag(chunk, "compute_cap") or _xml_tag(chunk, "cuda_compute_capability")
        facts.gpus.append(
            Gpu(
                index=_int(_xml_tag(chunk, "minor_number")),
                name=_name(_xml_tag(chunk, "product_name")),
                pci_bus_id=_bus_id(_xml_tag(chunk, "pci_bus_id")) or _bus_id(match.group(1)),
                uuid=_uuid(_xml_tag(chunk, "uuid")),
                serial=_xml_tag(chunk, "serial"),
                compute_capability=cc if cc and re.fullmatch(r"\d+\.\d+", cc) else None,
                memory_total_mib=_mib(memory.group(1)) if memory else None,
                brand=_xml_tag(chunk, "product_brand"),
                architecture=normalise_architecture(_xml_tag(chunk, "product_architecture")),
                mig_mode=_mode(mig.group(1)) if mig else None,
                persistence_mode=_mode(_xml_tag(chunk, "persistence_mode")),
            )
        )
    return facts


@_safe
def parse_xml(text: str) -> HostFacts:
    """`nvidia-smi -q -x` (any DTD version); truncated XML is read tag by tag."""
    body = "\n".join(_lines(text))
    start = _XML_START.search(body)
    if start is None:
        return HostFacts()
    body = body[start.start() :]
    end = body.find("</nvidia_smi_log>")
    if end >= 0:
        body = body[: end + len("</nvidia_smi_log>")]
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        return _xml_by_regex(body)
    if root.tag != "nvidia_smi_log":
        return HostFacts()
    facts = HostFacts()
    facts.driver.version = _version(
        _clean(root.findtext("kmd_version")) or root.findtext("driver_version")
    )
    facts.driver.cuda_version = _version(
        _clean(root.findtext("cuda_umd_version")) or root.findtext("cuda_version")
    )
    facts.gpus = [_xml_gpu(element) for element in root.findall("gpu")]
    return facts


# --- nvidia-smi -L -------------------------------------------------------------------------------

_LIST_HEAD = re.compile(r"(?:^|\s)GPU (\d+): ")
_LIST_UUID = re.compile(r" \(UUID: (GPU-[0-9A-Fa-f-]+)\)")


_LIST_COMMAND = re.compile(r"nvidia-smi(?:\.exe)?\s+(?:-L|--list-gpus)\s*$")
_FENCES = ("```", "~~~")


def _cut_list_gpu(line: str) -> tuple[str, str] | None:
    """(index, name) of a "GPU n: NAME" line cut before its "(UUID: ...)", or None."""
    stripped = line.strip()
    head = _LIST_HEAD.match(stripped)
    if head is None or head.start() != 0:
        return None
    name = stripped[head.end() :].split(" (", 1)[0].strip()
    return (head.group(1), name) if name else None


def _list_gpu(line: str) -> tuple[str, str, str] | None:
    """(index, name, uuid) of a "GPU n: NAME (UUID: GPU-...)" line.

    The name runs to the first UUID after the first "GPU n: ": one regex with a lazy name in
    between rescans the line from every "GPU n: " in it.
    """
    head = _LIST_HEAD.search(line)
    if head is None:
        return None
    uuid = _LIST_UUID.search(line, head.end() + 1)
    if uuid is None:
        return None
    return head.group(1), line[head.end() : uuid.start()], uuid.group(1)


@_safe
def parse_list(text: str) -> HostFacts:
    """`nvidia-smi -L`: one Gpu per "GPU n: NAME (UUID: GPU-...)" line; MIG lines are skipped."""
    facts = HostFacts()
    lines = _lines(text)
    for line in lines:
        match = _list_gpu(line)
        if match is None or line.lstrip().startswith("MIG"):
            continue
        facts.gpus.append(Gpu(index=int(match[0]), name=_name(match[1]), uuid=match[2]))
    if not facts.gpus:
        facts.gpus = _cut_list(lines)
    facts.gpus.extend(_cut_last(lines, facts.gpus))
    return facts


def _cut_last(lines: list[str], listed: list[Gpu]) -> list[Gpu]:
    """The GPU of a paste that ends inside its line ("GPU 1: NVIDIA GeForc", NixOS/nixpkgs#353059).

    Read only as the paste's last line (a closing markdown fence aside), right under a full
    "GPU n: NAME (UUID: ...)" line of the GPU before it; the name is cut, so it stays unknown.
    """
    text = [line for line in lines if line.strip() and not line.strip().startswith("```")]
    if len(text) < 2 or not listed or listed[-1].uuid is None or _list_gpu(text[-1]) is not None:
        return []
    row = _cut_list_gpu(text[-1])
    before = _list_gpu(text[-2]) if _cut_list_gpu(text[-2]) else None  # a line of its own
    if row is None or before is None or int(before[0]) != listed[-1].index:
        return []
    return [Gpu(index=int(row[0]))] if int(row[0]) == int(before[0]) + 1 else []


def _cut_list(lines: list[str]) -> list[Gpu]:
    """GPUs of an `nvidia-smi -L` paste cut before its first UUID.

    Only the "GPU n: NAME" lines under the last `nvidia-smi -L` command line count, and only when
    nothing else follows them up to the end or a closing code fence: another tool's "GPU n: "
    line is never read without a UUID.
    """
    last = -1
    for i, line in enumerate(lines):
        if _LIST_COMMAND.search(line) is not None:
            last = i
    if last < 0:
        return []
    below = lines[last + 1 :]
    fence = next((i for i, line in enumerate(below) if line.lstrip().startswith(_FENCES)), None)
    rows = [_cut_list_gpu(line) for line in below[:fence] if line.strip()]
    if not rows or any(row is None for row in rows):
        return []
    return [Gpu(index=int(row[0]), name=_name(row[1])) for row in rows if row is not None]


# --- nvidia-smi --version ------------------------------------------------------------------------

_VERSION_LINE = re.compile(
    r"^[^\S\n]*(NVIDIA-SMI|NVML|DRIVER|KMD|CUDA UMD|CUDA) version\s*:\s*(.*)$", re.I | re.M
)


@_safe
def parse_version(text: str) -> HostFacts:
    """`nvidia-smi --version`: driver (or KMD), CUDA (or CUDA UMD) and NVML versions."""
    facts = HostFacts()
    seen: dict[str, str] = {}
    for match in _VERSION_LINE.finditer("\n".join(_lines(text))):
        key = match.group(1).upper()
        value = _version(match.group(2)) if "deprecated" not in match.group(2).lower() else None
        if value is not None and key not in seen:
            seen[key] = value
    facts.driver.version = seen.get("KMD") or seen.get("DRIVER")
    facts.driver.cuda_version = seen.get("CUDA UMD") or seen.get("CUDA")
    facts.driver.nvml_library_version = seen.get("NVML")
    return facts


# --- failure texts -------------------------------------------------------------------------------

SMI_NO_DRIVER = "couldn't communicate with the NVIDIA driver"
SMI_NO_DEVICES = "No devices were found"
_NVML_INIT = re.compile(r"Failed to initialize NVML:[ \t]*([^\n\t\"]+)")
_NVML_LIBRARY = re.compile(r"NVML library version:\s*(\d+(?:\.\d+)+)")
_NO_HANDLE = re.compile(
    r"Unable to determine the device handle for (?:GPU|gpu)\s*\S+?:?\s+([^\n]+)"
)
_SMI_MISMATCH = "Mismatch in versions between nvidia-smi and NVML"


@_safe
def parse_errors(text: str) -> HostFacts:
    """The texts nvidia-smi prints when it cannot reach the driver or NVML."""
    facts = HostFacts()
    body = "\n".join(_lines(text))
    if "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver" in body:
        facts.driver.smi_error = SMI_NO_DRIVER
    elif re.search(r"^[^\S\n]*No devices were found\s*$", body, re.M):
        facts.driver.smi_error = SMI_NO_DEVICES
    elif _SMI_MISMATCH in body:
        facts.driver.smi_error = _SMI_MISMATCH
    else:
        handle = _NO_HANDLE.search(body)
        if handle is not None:
            reason = handle.group(1).strip().split("  ")[0].rstrip(".")
            facts.driver.smi_error = f"Unable to determine the device handle: {reason}"
    nvml = _NVML_INIT.search(body)
    if nvml is not None:
        facts.driver.nvml_error = nvml.group(1).strip().rstrip(".") or None
    library = _NVML_LIBRARY.search(body)
    if library is not None:
        facts.driver.nvml_library_version = library.group(1)
    return facts


# --- detection -----------------------------------------------------------------------------------


def _detect_table(text: str) -> bool:
    """The title line ("NVIDIA-SMI 550.54  Driver Version: ...") or the column header line."""
    eol = last = -1  # the end of the line last looked at, and its last "Version:"
    for title in _TABLE_SMI.finditer(text):
        if title.end() > eol:  # each line is searched for "Version:" once
            eol = text.find("\n", title.end())
            eol = len(text) if eol == -1 else eol
            last = text.rfind("Version:", title.end(), eol)
        if last >= title.end():
            return True
    return _TABLE_COLUMNS.search(text) is not None


_PROSE_VERSIONS = re.compile(
    r"(?:Driver|KMD) Version:\s*(?P<driver>\d{3}\.\d+(?:\.\d+)?)\s+"
    r"CUDA(?: UMD)? Version:\s*(?P<cuda>\d+\.\d+)"
)


@_safe
def parse_version_line(text: str) -> HostFacts:
    """ "Driver Version: 525.105.17   CUDA Version: 12.0" quoted in prose, without the table; a
    catalogued GPU's name alone on the next line, where the pair is its line's only words, is the
    table's name cell copied with it ("NVIDIA GeForce GTX 950M", ollama/ollama#2064)."""
    facts = HostFacts()
    match = _PROSE_VERSIONS.search(text)
    if match is not None:
        facts.driver.version = match.group("driver")
        facts.driver.cuda_version = match.group("cuda")
        name = _name_below(text, match)
        facts.gpus = [Gpu(name=name)] if name else []
    return facts


def _name_below(text: str, match: re.Match[str]) -> str | None:
    """The GPU's name alone on the line after a line that holds the version pair alone."""
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    if end == -1:
        return None
    if text[start : match.start()].strip(" \t|") or text[match.end() : end].strip(" \t|"):
        return None
    below = text.find("\n", end + 1)
    line = text[end + 1 : below if below != -1 else len(text)]
    return line.strip() if _header_name(line) else None


def _detect_version_line(text: str) -> bool:
    return not _detect_table(text) and _PROSE_VERSIONS.search(text) is not None


def _detect_csv(text: str) -> bool:
    if _QUERY_GPU.search(text):
        return True
    return any(_csv_header(line.strip()) is not None for line in _lines(text) if "," in line)


def _detect_query_text(text: str) -> bool:
    return "NVSMI LOG" in text or bool(
        re.search(r"^[^\S\n]*Product Name\s+:", text, re.M)
        and re.search(r"^GPU [0-9A-F]", text, re.M)
    )


def _detect_query_grep(text: str) -> bool:
    return not _detect_query_text(text) and any(_q_grep_blocks(text))


def _detect_xml(text: str) -> bool:
    return "<nvidia_smi_log" in text


def _detect_list(text: str) -> bool:
    lines = text.split("\n")
    return any(_list_gpu(line) is not None for line in lines) or bool(_cut_list(lines))


def _detect_version(text: str) -> bool:
    return bool(re.search(r"^[^\S\n]*NVIDIA-SMI version\s*:", text, re.I | re.M))


def _detect_errors(text: str) -> bool:
    return any(
        marker in text
        for marker in (
            "NVIDIA-SMI has failed",
            "Failed to initialize NVML",
            "NVML library version:",
            SMI_NO_DEVICES,
            _SMI_MISMATCH,
            "Unable to determine the device handle",
        )
    )


FORMATS: list[Format] = [
    Format("nvidia-smi table", _detect_table, parse_table),
    Format("nvidia-smi --query-gpu CSV", _detect_csv, parse_query_csv),
    Format("nvidia-smi -q", _detect_query_text, parse_query_text),
    Format("nvidia-smi -q through grep", _detect_query_grep, parse_query_grep),
    Format("nvidia-smi -q head", _detect_query_head, parse_query_head),
    Format("nvidia-smi -q -x", _detect_xml, parse_xml),
    Format("nvidia-smi -L", _detect_list, parse_list),
    Format("nvidia-smi --version", _detect_version, parse_version),
    Format("nvidia-smi errors", _detect_errors, parse_errors),
    Format("driver and CUDA version line", _detect_version_line, parse_version_line),
]


# --- the probe -----------------------------------------------------------------------------------

_MARKER = "=== gpuprov:{} ==="
_MARKER_LINE = re.compile(r"^=== gpuprov:([\w-]+) ===\s*$", re.M)
_Q_KEEP = (
    "^(Driver Version|CUDA Version|KMD Version|CUDA UMD Version|GPU [0-9A-Fa-f]"
    "|    Product (Name|Brand|Architecture)|    GPU UUID)"
)

PROBE_COMMAND = "; ".join(
    [
        f"echo '{_MARKER.format('query-gpu')}'",
        f"nvidia-smi --query-gpu={','.join(PROBE_FIELDS)} --format=csv 2>&1"
        f" || nvidia-smi --query-gpu={','.join(PROBE_FIELDS_OLD)} --format=csv 2>&1",
        f"echo '{_MARKER.format('query')}'",
        f"nvidia-smi -q 2>&1 | grep -E '{_Q_KEEP}|NVIDIA-SMI|NVML|No devices'",
    ]
)


def _sections(text: str) -> list[tuple[str, str]]:
    """(name, body) for each marker-delimited section; unmarked text is one section named ""."""
    marks = list(_MARKER_LINE.finditer(text))
    if not marks:
        return [("", text)]
    out = [("", text[: marks[0].start()])] if text[: marks[0].start()].strip() else []
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        out.append((mark.group(1), text[mark.end() : end]))
    return out


@_safe
def parse_probe(text: str) -> HostFacts:
    """The probe's output: the CSV section, then the filtered -q section, merged."""
    facts = HostFacts()
    for name, body in _sections(text):
        parsers: list[Callable[[str], HostFacts]]
        if name == "query-gpu":
            parsers = [parse_query_csv, parse_errors]
        elif name == "query":
            parsers = [parse_query_text, parse_errors]
        else:
            parsers = [fmt.parse for fmt in FORMATS if fmt.detect(body)]
        for parse in parsers:
            facts = merge(facts, parse(body))
    return facts


PROBES: list[Probe] = [
    Probe(
        name="nvidia-smi",
        command=PROBE_COMMAND,
        parse=parse_probe,
        requires="nvidia-smi",
        timeout=30.0,
        local=nvml.read,
    )
]
