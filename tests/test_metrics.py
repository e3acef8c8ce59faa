"""llama-server's own Prometheus endpoint: the profile setting `metrics` and its --metrics flag.

Real: the --help output of the llama.cpp builds gpuprov's fixtures record
(tests/fixtures/llama_server/, provenance in its SOURCES.tsv), read by the gate's parser, and the
gate's check of a profile's arguments against them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from checks.services import llama_server_args
from checks.services.llama_server_help import parse_help
from provision import stack
from provision.settings.read import StackError
from tests.conftest import FIXTURES

HELPS = sorted((FIXTURES / "llama_server").glob("help_*.txt"))
PROFILE = {"name": "a", "model": "/m.gguf", "port": 8080}


def profile(**changes: object) -> stack.Profile:
    data = {"llama_server_profiles": [{**PROFILE, **changes}]}
    return stack.from_data(data).profiles[0]


def test_metrics_is_off_by_default() -> None:
    assert profile().metrics is False
    assert "--metrics" not in profile().args()


def test_metrics_adds_the_flag_before_extra_args() -> None:
    args = profile(metrics=True, extra_args=["--jinja"]).args()
    assert args[-2:] == ["--metrics", "--jinja"]


def test_metrics_over_the_defaults() -> None:
    data = {"llama_server_profiles": [PROFILE], "llama_server_defaults": {"metrics": True}}
    assert stack.from_data(data).profiles[0].metrics is True


def test_metrics_must_be_a_boolean() -> None:
    with pytest.raises(StackError, match=r"llama_server_profiles\[0\]\.metrics"):
        profile(metrics="yes")


@pytest.mark.parametrize("path", HELPS, ids=lambda p: p.stem)
def test_every_recorded_build_accepts_metrics(path: Path) -> None:
    options = parse_help(path.read_text())
    assert options.find("--metrics") is not None
    assert llama_server_args.refused(profile(metrics=True).args(), options) == []


def test_a_build_without_metrics_refuses_it() -> None:
    """The gate names --metrics for a build whose --help lacks it (the recorded help with the
    option's two lines taken out)."""
    lines = (FIXTURES / "llama_server" / "help_b6784_genai-electron.txt").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("--metrics "))
    assert "LLAMA_ARG_ENDPOINT_METRICS" in lines[at + 1]
    options = parse_help("\n".join(lines[:at] + lines[at + 2 :]))
    refused = llama_server_args.refused(profile(metrics=True).args(), options)
    assert refused and refused[0].startswith("--metrics")
