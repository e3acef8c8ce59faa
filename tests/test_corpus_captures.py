"""Real pasted captures from public threads, each read by `gpuprov facts --from`: the driver, its
CUDA, the GPUs and their compute capabilities come out as the text shows them.

tests/fixtures/corpus/captures/ holds the captures as they were pasted (cut where the paste was
cut), MANIFEST.tsv there their source and what gpuprov must read: `driver` (the NVIDIA driver,
userspace or else the loaded kernel module, as the checks take it), `cuda` (the CUDA version the
driver reports, never the toolkit's), `gpus` (names in order, `;`-separated, `?` for a GPU whose
name the text does not show) and `ccs` (their compute capabilities, from the text or the GPU
catalogue, `-` where unknown); a lone `-` is a fact the text does not show. `other` pins more
facts as `path=value` pairs separated by `;` (`system.l4t_release=38.2.0`,
`gpus.pci_device_id=10de:2335,10de:2335`: a path through a list gives each item's value, joined
by `,`; `-` for an unknown value), or is `-`. `status` "ok", or "gap: <what is missing>": a strict
xfail, so reading it right fails the test until the row is updated.

tests/fixtures/recorded/<machine>/ holds outputs recorded on machines of known make, in the same
MANIFEST format with a `source` that says where and when: what the machine reported through NVML
is the answer there. They are not counted with the public captures.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from provision.cli import app
from tests.conftest import FIXTURES

CAPTURES = FIXTURES / "corpus" / "captures"
LISTING = CAPTURES / "MANIFEST.tsv"
RECORDED = sorted((FIXTURES / "recorded").glob("*/MANIFEST.tsv"))
COLUMNS = ["file", "kind", "source", "driver", "cuda", "gpus", "ccs", "other", "status"]


def manifest(listing: Path = LISTING) -> list[dict[str, str]]:
    with listing.open(newline="") as stream:
        return list(csv.DictReader(stream, delimiter="\t", quoting=csv.QUOTE_NONE))


def _cases(listing: Path = LISTING) -> list[object]:
    cases: list[object] = []
    for row in manifest(listing):
        marks = []
        if row["status"].startswith("gap:"):
            marks = [pytest.mark.xfail(strict=True, reason=f"not read yet: {row['status']}")]
        row = {**row, "folder": str(listing.parent)}
        cases.append(pytest.param(row, id=f"{listing.parent.name}/{row['file']}", marks=marks))
    return cases


def read_facts(path: Path) -> dict[str, Any]:
    """The facts JSON `gpuprov facts --json --from path` prints; the command must succeed."""
    result = CliRunner().invoke(app, ["facts", "--json", "--from", str(path)])
    assert result.exit_code == 0, result.output
    facts: dict[str, Any] = json.loads(result.stdout)
    return facts


def expected(
    row: dict[str, str],
) -> tuple[str | None, str | None, list[str | None], list[str | None]]:
    """(driver, cuda, GPU names, compute capabilities) as the row states them."""

    def one(value: str) -> str | None:
        return None if value in ("-", "?") else value

    names = [] if row["gpus"] == "-" else [one(n) for n in row["gpus"].split(";")]
    ccs = [one(c) for c in row["ccs"].split(";")] if names else []
    return one(row["driver"]), one(row["cuda"]), names, ccs


def read(
    facts: dict[str, Any],
) -> tuple[str | None, str | None, list[str | None], list[str | None]]:
    """The same four facts from the facts JSON."""
    driver = facts["driver"]
    gpus = facts["gpus"]
    return (
        driver["version"] or driver["kernel_module_version"],
        driver["cuda_version"],
        [gpu["name"] for gpu in gpus],
        [gpu["compute_capability"] for gpu in gpus],
    )


def other(row: dict[str, str]) -> dict[str, str]:
    """The row's `other` facts: path -> value as written."""
    if row["other"] == "-":
        return {}
    return dict(pair.split("=", 1) for pair in row["other"].split(";"))


def at(facts: Any, path: str) -> str:
    """The value at a dotted path of the facts JSON, as `other` writes it."""
    value = facts
    for part in path.split("."):
        value = [item[part] for item in value] if isinstance(value, list) else value[part]

    def text(item: Any) -> str:
        if isinstance(item, list):
            return ",".join(text(i) for i in item)
        return "-" if item is None else str(item)

    return text(value)


@pytest.mark.parametrize("row", _cases() + [c for listing in RECORDED for c in _cases(listing)])
def test_the_facts_are_what_the_capture_shows(row: dict[str, str]) -> None:
    facts = read_facts(Path(row["folder"]) / row["file"])
    assert read(facts) == expected(row)
    assert {path: at(facts, path) for path in other(row)} == other(row)


@pytest.mark.parametrize("listing", [LISTING, *RECORDED], ids=lambda p: p.parent.name)
def test_every_capture_is_listed_with_its_source(listing: Path) -> None:
    rows = manifest(listing)
    files = sorted(p.name for p in listing.parent.iterdir() if p.name != "MANIFEST.tsv")
    assert sorted(row["file"] for row in rows) == files
    source = "https://" if listing == LISTING else "recorded on "
    for row in rows:
        assert list(row) == COLUMNS and None not in row.values(), row["file"]
        assert row["source"].startswith(source), row["file"]
        assert row["status"] == "ok" or row["status"].startswith("gap: "), row["file"]
        names, ccs = expected(row)[2:]
        assert len(names) == len(ccs), row["file"]
        assert row["ccs"] == "-" or names, row["file"]
        assert all(path and value for path, value in other(row).items()), row["file"]
