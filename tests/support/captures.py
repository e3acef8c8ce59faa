"""The corpus captures as the parser tests read them."""

from __future__ import annotations

import pytest

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


def read_paste(text: str) -> HostFacts:
    """A paste as `--from` reads it, the catalogue filled in."""
    return gpus.enrich(capture.parse(capture.Capture("paste", text)))


def gpu_models(facts: HostFacts) -> list[tuple[str | None, str | None]]:
    """Each GPU's name and compute capability, in order."""
    return [(gpu.name, gpu.compute_capability) for gpu in facts.gpus]


def assert_unread(text: str) -> None:
    """The paste is not recognised at all."""
    with pytest.raises(capture.CaptureError):
        capture.parse(capture.Capture("paste", text))
