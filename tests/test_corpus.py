"""Real crash logs from public threads, each read by `gpuprov explain`: the top diagnosis is the
cause the thread agreed on.

tests/fixtures/corpus/logs/<area>/ holds the logs as they were pasted (cut where the paste was
cut), MANIFEST.tsv there their source, the agreed cause and fix, and `top`: the signature the top
diagnosis must come from ("none": nothing may be diagnosed). "gap: <cause>" marks a cause gpuprov
does not diagnose yet: a strict xfail, so diagnosing it fails the test until the row is updated.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from provision.cli import app
from tests.conftest import FIXTURES

CORPUS = FIXTURES / "corpus"
LOGS = sorted((CORPUS / "logs").glob("*/MANIFEST.tsv"))


def manifest(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as stream:
        return list(csv.DictReader(stream, delimiter="\t"))


def _log_cases() -> list[object]:
    cases: list[object] = []
    for listing in LOGS:
        for row in manifest(listing):
            path = listing.parent / row["file"]
            marks = []
            if row["top"].startswith("gap:"):
                marks = [pytest.mark.xfail(strict=True, reason=f"not diagnosed yet: {row['top']}")]
            key = f"{listing.parent.name}/{row['file']}"
            cases.append(
                pytest.param(path, row["top"].removeprefix("gap:").strip(), id=key, marks=marks)
            )
    return cases


def top_diagnosis(path: Path) -> str:
    """The signature (or rule) of explain's top diagnosis of `path`, or 'none'."""
    result = CliRunner().invoke(app, ["explain", "--json", str(path)])
    assert result.exit_code in (0, 1), result.output
    found = json.loads(result.stdout)["logs"][0]["diagnoses"]
    return str(found[0].get("signature") or found[0]["rule"]) if found else "none"


@pytest.mark.parametrize(("path", "top"), _log_cases())
def test_the_top_diagnosis_is_the_agreed_cause(path: Path, top: str) -> None:
    assert top_diagnosis(path) == top


@pytest.mark.parametrize("listing", LOGS, ids=lambda p: p.parent.name)
def test_every_log_is_listed_with_its_source(listing: Path) -> None:
    rows = manifest(listing)
    files = sorted(p.name for p in listing.parent.iterdir() if p.name != "MANIFEST.tsv")
    assert sorted(row["file"] for row in rows) == files
    for row in rows:
        assert row["source"].startswith("https://"), row["file"]
        assert row["expected"] and row["top"], row["file"]
