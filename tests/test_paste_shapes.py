"""The corpus again, pasted the other ways people paste: every real crash log and capture,
wrapped in the prefixes and layouts that reach issue threads, must give the same top diagnosis and
the same facts as the text itself does.

The shapes come from threads (each named where it first showed up in the corpus or a signature's
sources): journald (also with the month in the locale's words) and `journalctl -o short-iso`
prefixes, pdsh's `host: `, docker compose's `service-1  | `, `kubectl logs --timestamps` /
`docker logs -t` (RFC 3339 with nanoseconds), a bracketed timestamp, e-mail and markdown quote
marks, a markdown code block indented by four spaces, a fenced block with prose around it, CRLF
line ends and ANSI colours.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.test_corpus import LOGS, manifest, top_diagnosis
from tests.test_corpus_captures import CAPTURES, at, expected, other, read, read_facts
from tests.test_corpus_captures import manifest as capture_manifest


def _stamped(form: str) -> Callable[[list[str]], list[str]]:
    def wrap(lines: list[str]) -> list[str]:
        return [form.format(s=i % 60) + line for i, line in enumerate(lines)]

    return wrap


def _prefixed(prefix: str) -> Callable[[list[str]], list[str]]:
    return lambda lines: [prefix + line for line in lines]


SHAPES: dict[str, Callable[[list[str]], list[str]]] = {
    "journald": _stamped("Nov 23 20:22:{s:02d} gpubox ollama[911]: "),
    # a localised month (ollama/ollama#10798)
    "journald-zh": _stamped("5\u6708 21 17:49:{s:02d} gpubox ollama[1576]: "),
    "short-iso": _stamped("2025-11-23T20:22:{s:02d}+0000 gpubox vllm[911]: "),
    "pdsh": _prefixed("node01: "),
    "compose": _prefixed("vllm-1  | "),
    "kubectl": _stamped("2025-11-23T20:22:{s:02d}.123456789Z "),
    "bracket-stamp": _stamped("[2025-11-23 20:22:{s:02d}] "),
    "quote": _prefixed("> "),
    "indented": _prefixed("    "),
    "fenced": lambda lines: ["This is what I get, any idea?", "", "```console", *lines, "```"],
    "crlf": lambda lines: [line + "\r" for line in lines],
    "ansi": lambda lines: [f"\x1b[0;31m{line}\x1b[0m" for line in lines],
}


def _pasted(source: Path, shape: str, tmp_path: Path) -> Path:
    lines = source.read_text(encoding="utf-8", errors="replace").split("\n")
    path = tmp_path / source.name
    path.write_text("\n".join(SHAPES[shape](lines)), encoding="utf-8")
    return path


def _log_cases() -> list[object]:
    return [
        pytest.param(listing.parent / row["file"], row["top"], shape, id=f"{row['file']}-{shape}")
        for listing in LOGS
        for row in manifest(listing)
        if not row["top"].startswith("gap:")
        for shape in SHAPES
    ]


def _capture_cases() -> list[object]:
    return [
        pytest.param(row, shape, id=f"{row['file']}-{shape}")
        for row in capture_manifest()
        if row["status"] == "ok"
        for shape in SHAPES
    ]


@pytest.mark.parametrize(("source", "top", "shape"), _log_cases())
def test_a_pasted_log_gets_the_same_diagnosis(
    source: Path, top: str, shape: str, tmp_path: Path
) -> None:
    assert top_diagnosis(_pasted(source, shape, tmp_path)) == top


@pytest.mark.parametrize(("row", "shape"), _capture_cases())
def test_a_pasted_capture_reads_the_same_facts(
    row: dict[str, str], shape: str, tmp_path: Path
) -> None:
    facts = read_facts(_pasted(CAPTURES / row["file"], shape, tmp_path))
    assert read(facts) == expected(row)
    assert {path: at(facts, path) for path in other(row)} == other(row)
