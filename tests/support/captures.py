"""The corpus captures as the parser tests read them."""

from __future__ import annotations

from checks.facts import capture, gpus
from checks.facts.model import HostFacts
from tests.conftest import FIXTURES

CAPTURES = FIXTURES / "corpus" / "captures"


def capture_text(name: str) -> str:
    """A capture's text as the parsers see it, prefixes and quote marks taken off."""
    return capture.clean((CAPTURES / name).read_text())


def read_capture(name: str) -> HostFacts:
    """A capture as `--from` reads it, the catalogue filled in."""
    path = CAPTURES / name
    return gpus.enrich(capture.parse(capture.Capture(str(path), path.read_text())))


def gpu_names(facts: HostFacts) -> list[str | None]:
    return [gpu.name for gpu in facts.gpus]
