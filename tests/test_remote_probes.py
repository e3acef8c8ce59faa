"""The probes as one framed shell script (what pyinfra runs on a remote host), run here with sh.

Real: every probe's command, /bin/sh, coreutils' timeout, and the parsers. The remote side is this
machine; its facts are compared with the in-process gatherer's.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from checks.facts import gather, remote
from checks.facts.model import HostFacts, to_dict
from checks.facts.probe import Probe


def run_script(probes: list[Probe]) -> str:
    done = subprocess.run(
        ["sh", "-c", remote.script(probes)],
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def facts_dict(facts: HostFacts) -> dict[str, Any]:
    data: dict[str, Any] = to_dict(facts)
    del data["sources"], data["probes"]
    return data


def statuses(facts: HostFacts) -> list[tuple[str, str]]:
    return [(r.name, r.status) for r in facts.probes]


class Recorder:
    """A parser that keeps the text it was given."""

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}

    def probe(self, name: str, command: str, **kw: Any) -> Probe:
        def parse(text: str) -> HostFacts:
            self.texts[name] = text
            return HostFacts()

        return Probe(name, command, parse, **kw)


def test_script_gives_the_facts_gather_gives() -> None:
    """Same commands, framed in one script or run one by one: same facts, same statuses."""
    probes = [dataclasses.replace(p, local=None) for p in gather.all_probes()]
    remote_facts = remote.parse(probes, run_script(probes), "sh here")
    local_facts = gather.gather(probes)
    assert remote_facts.sources == ["sh here"]
    assert facts_dict(remote_facts) == facts_dict(local_facts)
    assert statuses(remote_facts) == statuses(local_facts)
    assert [r.detail for r in remote_facts.probes if r.status != "ok"] == [
        r.detail for r in local_facts.probes if r.status != "ok"
    ]


def test_script_agrees_with_gather_and_its_fast_paths() -> None:
    """With gather's in-process fast paths on, only what those fill (GPUs, driver) may differ."""
    probes = gather.all_probes()
    remote_facts = facts_dict(remote.parse(probes, run_script(probes), "sh here"))
    local_facts = facts_dict(gather.gather())
    fast = {"gpus", "driver"} if any(p.local for p in probes) else set()
    assert {k: v for k, v in remote_facts.items() if k not in fast} == {
        k: v for k, v in local_facts.items() if k not in fast
    }


COMMANDS = [
    "echo out; echo err >&2",
    "echo \"it's\" '$HOME' \\\\ '%s'",
    "printf 'a\\nb\\n'; exit 3",
    "true",
    "printf '\\n\\n'",
]


@pytest.mark.parametrize("command", COMMANDS)
def test_parser_sees_what_gather_gives_it(command: str) -> None:
    framed, direct = Recorder(), Recorder()
    probes = [framed.probe("p", command)]
    facts = remote.parse(probes, run_script(probes), "")
    assert statuses(facts) == [("p", "ok")]
    gather.run_probe(direct.probe("p", command))
    assert framed.texts == direct.texts


def test_output_without_final_newline() -> None:
    rec = Recorder()
    probes = [rec.probe("p", "printf abc")]
    facts = remote.parse(probes, run_script(probes), "")
    assert statuses(facts) == [("p", "ok")]
    assert rec.texts["p"].rstrip("\n") == "abc"


def test_missing_required_binary_is_absent_and_not_run(tmp_path: Path) -> None:
    rec = Recorder()
    marker = tmp_path / "ran"
    probes = [
        rec.probe("ghost", f"touch {marker}", requires="gpuprov-no-such-tool"),
        rec.probe("sh", "echo here", requires="sh"),
    ]
    facts = remote.parse(probes, run_script(probes), "")
    assert [(r.name, r.status, r.detail) for r in facts.probes] == [
        ("ghost", "absent", "gpuprov-no-such-tool not found"),
        ("sh", "ok", None),
    ]
    assert not marker.exists()
    assert rec.texts == {"sh": "here\n"}


@pytest.mark.skipif(shutil.which("timeout") is None, reason="no timeout(1)")
def test_probe_past_its_timeout_fails() -> None:
    rec = Recorder()
    probes = [rec.probe("slow", "sleep 5", timeout=1), rec.probe("next", "echo next")]
    output = run_script(probes)
    assert f"{remote.MARK} 0 end 124" in output
    facts = remote.parse(probes, output, "")
    assert [(r.name, r.status, r.detail) for r in facts.probes] == [
        ("slow", "failed", "timed out after 1s"),
        ("next", "ok", None),
    ]
    assert rec.texts == {"next": "next\n"}


def test_output_cut_short_fails_the_unfinished_probes() -> None:
    rec = Recorder()
    probes = [rec.probe("first", "echo one"), rec.probe("second", "echo two")]
    output = run_script(probes)
    cut = output[: output.index(f"{remote.MARK} 1 end")]
    facts = remote.parse(probes, cut, "")
    assert [(r.name, r.status, r.detail) for r in facts.probes] == [
        ("first", "ok", None),
        ("second", "failed", "no output"),
    ]
    assert rec.texts == {"first": "one\n"}
    nothing = remote.parse(probes, "", "")
    assert statuses(nothing) == [("first", "failed"), ("second", "failed")]


def test_parser_that_raises_is_unparsed() -> None:
    def boom(text: str) -> HostFacts:
        raise ValueError(f"cannot read {text.strip()}")

    rec = Recorder()
    probes = [Probe("bad", "echo junk", boom), rec.probe("good", "echo fine")]
    facts = remote.parse(probes, run_script(probes), "")
    assert [(r.name, r.status, r.detail) for r in facts.probes] == [
        ("bad", "unparsed", "ValueError: cannot read junk"),
        ("good", "ok", None),
    ]
