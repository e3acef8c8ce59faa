"""Facts from captured outputs (`--from`): a facts or report JSON, or pasted command outputs.

Pasted text is cleaned once (CRLF, ANSI colours, HTML entities, "> " quote prefixes, inline HTML
tags, full-width colons, commas and brackets, the prefixes journald, syslog, docker, kubectl,
docker compose, Python logging and log wrappers put before each line, the indent of an indented
code block), cut to the first host of a pdsh, clush or ansible paste, and every known format that
detects itself in it parses it; several files merge into one host.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass

from checks import inputs
from checks.facts import parsers
from checks.facts.model import HostFacts, ProbeResult, fill_in, from_dict, merge
from checks.facts.parsers import Format

MAX_BYTES = 64 * 1024 * 1024
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_QUOTE = re.compile(r"^[ \t]*(?:>[ \t]?)+", re.MULTILINE)
# Inline tags of HTML pasted into an issue ("<pre>deviceQuery...", "<b>CUDA Capability ...</b>").
_TAGS = re.compile(r"</?(?:b|strong|i|em|pre|code|tt|kbd|br)\s*/?>", re.IGNORECASE)
# What an e-mail reply to an issue does to pasted output: "<gpu&gt;", indents as "&nbsp; &nbsp;"
# (1Panel-dev/1Panel#11910). nvidia-smi's own text never holds these; its XML escapes only in
# values, which the parsers still read by tag when the unescaped XML no longer parses.
_ENTITY = re.compile(r"&(gt|lt|amp|quot|#39|nbsp);")
_ENTITIES = {"gt": ">", "lt": "<", "amp": "&", "quot": '"', "#39": "'", "nbsp": " "}
# The full-width colon, comma and brackets Chinese and Japanese input methods type, as the ASCII
# marks with the blank their width holds: "GPU 0\uff1a Tesla P100-PCIE-16GB"
# (pytorch/pytorch#37212), "CUDA\uff1a13.1", "RTX 5080\uff08Blackwell\uff09"
# (ggml-org/llama.cpp#22499).
_FULL_WIDTH = re.compile("\uff1a[ \t]?|\uff0c[ \t]?|[ \t]?\uff08|\uff09")
_HALF_WIDTH = {"\uff1a": ": ", "\uff0c": ", ", "\uff08": " (", "\uff09": ")"}
# The month journalctl and syslog print, their locale's abbreviation (strftime's %b): a word
# ("Feb", "Dez", "Ara", "дек"), two or three words ("de des." in Catalan, ollama/ollama#13312;
# "كانون الثاني"), a number with its word after ("2月" in Chinese and Japanese, ollama/ollama#9245;
# "12월" in Korean) or before ("Thg 12" in Vietnamese).
JOURNAL_MONTH = (
    r"(?:[^\s\d]{1,10}(?:[ ][^\s\d]{1,12}){0,2}|[^\s\d]{1,10}[ ]\d{1,2}|[ ]?\d{1,2}[^\s\d]{1,3})"
)
# What a log system puts before each line: syslog or `journalctl` ("Feb 28 12:44:31 host
# ollama[854770]: ", with no host when the journal leaves it out, "Sep 26 10:43:08 ollama[6664]: "
# in ollama/ollama#12403, a localised month "2月 21 ...", "de des. 03 ..."), `journalctl -o
# short-iso` ("2025-02-28T12:44:31+0000 host proc[1]: "), a kernel timestamp ("[   12.442423] "),
# and llama-box's elapsed time and level ("0.00.125.936 I "). Every run is bounded or stops at a
# blank, so each line start is tried once.
_LOG_PREFIX = re.compile(
    rf"^(?:{JOURNAL_MONTH}[ \t]{{1,2}}\d{{1,2}}日?"
    r"[ \t]\d\d:\d\d:\d\d(?:\.\d{1,9})?"
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?)"
    r"[ \t](?:[\w.-]{1,255}[ \t])?[\w./@-]{1,255}(?:\[\d{1,10}\])?:[ \t]"
    r"|^\[[ \t]{0,12}\d{1,10}\.\d{1,9}\][ \t]"
    r"|^\d{1,4}\.\d\d\.\d\d\d\.\d\d\d [DIWE] ?",
    re.MULTILINE,
)
# A timestamp alone before each line: `docker logs -t` and `kubectl logs --timestamps` (RFC 3339
# in UTC with nanoseconds, "2025-11-23T20:22:01.123456789Z "), or one in brackets. Taken off before
# _LOG_PREFIX, which would read the first two words of the line as a host and a process.
_STAMP = re.compile(
    r"^(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{1,9}Z"
    r"|\[\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?\])[ \t]",
    re.MULTILINE,
)
# Python logging's "%(asctime)s - %(name)s - %(levelname)s - " (the format of the logging
# HOWTO's examples; a wrapper that re-logs a server's output, chatdoc-com/OCRFlux#70):
# "2025-08-13 04:39:39,465 - __main__ - INFO - ". Each run is bounded.
_PYLOG = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - [^\s]{1,255}"
    r" - (?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL) - ",
    re.MULTILINE,
)
# `docker compose logs` / `docker-compose up`: "service-1  | " before every line of a service.
_SERVICE = re.compile(r"([A-Za-z0-9][\w.-]{0,62})[ \t]{1,40}\| ")


# pdsh and clush put "host: " before every line a host prints; ansible's shell module prints a
# "host | CHANGED | rc=0 >>" header above each host's output. A prefix counts as a host when it is
# a host name with a digit (node01, gpu-3, dgx1) or localhost, and not the kernel's "nvidia0: ":
# words ("NVRM: ", "nvidia: ", "main: ") and llama.cpp's "function_name: " never count.
_HOST_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9.-]{0,62}): (.*)$", re.MULTILINE)
_HOST_NAME = re.compile(r"(?!nvidia|nvrm)[a-z0-9.-]*\d[a-z0-9.-]*|localhost", re.IGNORECASE)
_ANSIBLE = re.compile(
    r"^([^\s|]{1,253}) \| (?:CHANGED|SUCCESS|FAILED!?|UNREACHABLE!?)(?: \| rc=-?\d{1,5})?"
    r" >>[ \t]*$",
    re.MULTILINE,
)
MIN_HOST_LINES = 3  # a host prefixes at least this many lines in a row somewhere
PREFIX_LAYERS = 4  # prefixes wrapping prefixes that clean() takes off, at most


class CaptureError(Exception):
    """A capture that cannot be read or holds nothing known; the message names the file."""


@dataclass(frozen=True)
class Capture:
    name: str
    text: str


def formats() -> list[Format]:
    return [fmt for module in parsers.modules() for fmt in getattr(module, "FORMATS", [])]


def clean(text: str) -> str:
    """Undo what terminals and issue trackers do to pasted output."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _ANSI.sub("", text)
    text = _ENTITY.sub(lambda m: _ENTITIES[m.group(1)], text)
    text = _TAGS.sub("", text)
    text = _FULL_WIDTH.sub(lambda m: _HALF_WIDTH[m.group(0).strip(" \t")], text)
    # Outside in: a collector's prefix may wrap another's (journald over docker compose, quote
    # marks or an indented block under a prefix), so prefixes come off a layer at a time.
    for _ in range(PREFIX_LAYERS):
        peeled = _peel(text)
        if peeled == text:
            break
        text = peeled
    return text


def _peel(text: str) -> str:
    """One layer of line prefixes off: quote marks, timestamps, log and compose prefixes, and
    the indent of an indented block. An indented block is taken in first as well, so quote marks
    inside one (a quoted paste indented as a whole) come off with it."""
    text = _PYLOG.sub("", _STAMP.sub("", _QUOTE.sub("", _dedent(text))))
    return _dedent(_without_services(_LOG_PREFIX.sub("", text)))


def _without_services(text: str) -> str:
    """Text without docker compose's "service-1  | " prefixes: a name counts as a service when
    it prefixes MIN_HOST_LINES lines in a row somewhere (a table's "Name | ..." never does)."""
    lines = text.split("\n")
    found = [_SERVICE.match(line) for line in lines]
    names = [m.group(1) if m else None for m in found]
    services, run = set(), 0
    for i, name in enumerate(names):
        run = run + 1 if name and i and names[i - 1] == name else int(name is not None)
        if run >= MIN_HOST_LINES:
            services.add(name)
    if not services:
        return text
    return "\n".join(
        line[m.end() :] if m and m.group(1) in services else line
        for line, m in zip(lines, found, strict=True)
    )


def _dedent(text: str) -> str:
    """Text whose indented blocks (a markdown code block, a reply indented by four spaces) start
    at the margin: a block starts the text or follows a blank line and holds two lines or more;
    its lines lose the indent they share. Lines indented under a header stay as they are, so
    `nvidia-smi -q` keeps its nesting."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        if not (_indented(lines[i]) and (i == 0 or not lines[i - 1].strip())):
            out.append(lines[i])
            i += 1
            continue
        end = i
        while end < len(lines) and (_indented(lines[end]) or not lines[end].strip()):
            end += 1
        block = lines[i:end]
        filled = [line for line in block if line.strip()]
        indent = min(len(line) - len(line.lstrip(" \t")) for line in filled)
        out.extend(line[indent:] if len(filled) > 1 else line for line in block)
        i = end
    return "\n".join(out)


def _indented(line: str) -> bool:
    return line[:1] in (" ", "\t") and bool(line.strip())


def one_host(text: str) -> tuple[str, list[str]]:
    """The text of the first host in a pdsh, clush or ansible paste, and every host it shows.

    Facts describe one host, so when several appear only the first one's lines are kept (without
    their "host: " prefix); other lines (prose, prompts) stay. Text from no such tool is returned
    as it is, with no hosts.
    """
    headers = list(_ANSIBLE.finditer(text))
    if headers:
        end = headers[1].start() if len(headers) > 1 else len(text)
        body = text[headers[0].end() : end]
        return text[: headers[0].start()] + body, _unique(h.group(1) for h in headers)
    hosts = _prefix_hosts(text)
    if not hosts:
        return text, []
    first, others = hosts[0], set(hosts[1:])
    kept = []
    for line in text.split("\n"):
        host, sep, rest = line.partition(": ")
        if sep and host == first:
            kept.append(rest)
        elif not (sep and host in others):
            kept.append(line)
    return "\n".join(kept), hosts


def _prefix_hosts(text: str) -> list[str]:
    """Hosts that prefix MIN_HOST_LINES lines in a row, in order of their first line.

    Keys that repeat in one tool's output ("Path: ..." between other lines) never run in a row.
    """
    hosts: list[str] = []
    run_host, run, previous_end = "", 0, -2
    for match in _HOST_LINE.finditer(text):
        host = match.group(1)
        run = run + 1 if host == run_host and match.start() == previous_end + 1 else 1
        run_host, previous_end = host, match.end()
        if run >= MIN_HOST_LINES and host not in hosts and _HOST_NAME.fullmatch(host):
            hosts.append(host)
    return hosts


def _unique(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))


def read(paths: Iterable[str]) -> list[Capture]:
    """Read each path ("-" is stdin) as text; raises CaptureError naming the file."""
    captures = []
    for path in paths:
        try:
            if path == "-":
                data = sys.stdin.buffer.read(MAX_BYTES + 1)
            else:
                with inputs.open_input(path) as handle:
                    data = handle.read(MAX_BYTES + 1)
        except OSError as exc:
            raise CaptureError(f"{path}: cannot read: {exc.strerror or exc}") from exc
        if len(data) > MAX_BYTES:
            raise CaptureError(f"{path}: larger than {MAX_BYTES // (1024 * 1024)} MiB")
        captures.append(
            Capture("<stdin>" if path == "-" else path, data.decode("utf-8", "replace"))
        )
    return captures


def _from_json(text: str) -> HostFacts | None:
    try:
        data = inputs.loads(text)
    except inputs.InputError:
        raise  # JSON, but nested too deep for any output gpuprov reads
    except ValueError:
        return None
    if isinstance(data, dict) and isinstance(data.get("facts"), dict):
        data = data["facts"]
    if isinstance(data, dict) and "schema_version" in data and "driver" in data:
        return from_dict(HostFacts, data)
    return None


def recognise(text: str) -> tuple[HostFacts, list[str]]:
    """The facts of every known format found in `text`, and the names of those formats; the
    GPUs of a fallback format only where no other format named any, those of an annotating
    format only as what they tell of GPUs already read."""
    facts = HostFacts()
    seen = []
    for fmt in sorted(formats(), key=lambda fmt: (fmt.annotates, fmt.fallback)):
        if not fmt.detect(text):
            continue
        fragment = fmt.parse(text)
        if fmt.annotates:
            if fill_in(facts.gpus, fragment.gpus):
                seen.append(fmt.name)
            continue
        if fmt.fallback and facts.gpus:
            fragment.gpus = []
            if fragment == HostFacts():
                continue
        merge(facts, fragment)
        seen.append(fmt.name)
    return facts, seen


def parse(capture: Capture) -> HostFacts:
    """One capture's facts; raises CaptureError when nothing in it is recognised."""
    try:
        facts = _from_json(capture.text)
    except ValueError as exc:
        raise CaptureError(f"{capture.name}: not a valid facts file: {exc}") from exc
    if facts is not None:
        facts.sources = facts.sources or [capture.name]
        facts.probes.append(ProbeResult(f"from {capture.name}", "ok", "facts JSON"))
        return facts
    text, hosts = one_host(clean(capture.text))
    if hosts:  # what each host printed may carry prefixes of its own under pdsh's
        text = clean(text)
    facts, seen = recognise(text)
    facts.sources = [capture.name]
    if not seen:
        raise CaptureError(
            f"{capture.name}: no known command output recognised"
            " (for a crash log, use `gpuprov explain`)"
        )
    facts.probes.append(ProbeResult(f"from {capture.name}", "ok", ", ".join(seen)))
    if len(hosts) > 1:
        detail = f"the output of {hosts[0]} only; not read: {', '.join(hosts[1:])}"
        facts.probes.append(ProbeResult(f"hosts in {capture.name}", "ok", detail))
    return facts


def load(paths: Iterable[str]) -> HostFacts:
    """Facts of one host from every capture in `paths`, merged in order."""
    facts = HostFacts()
    for capture in read(paths):
        merge(facts, parse(capture))
    return facts
