"""What the command line prints: plain text when piped, and nothing that names the host when
redacted."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from checks.facts import capture, gather
from checks.facts.model import to_dict
from provision import gate
from provision.cli import app, expand_from
from provision.redact import REDACTED, redact
from tests.conftest import FIXTURES, REAL

GPUPROV = Path(sys.executable).parent / "gpuprov"
MARKUP = re.compile(r"\[/|\[(?:dim|bold|green|red|yellow|cyan)\b")
runner = CliRunner()


def run(*args: str) -> Any:
    return runner.invoke(app, expand_from(list(args)))


def _recognised(path: Path) -> bool:
    try:
        capture.parse(capture.read([str(path)])[0])
    except capture.CaptureError:
        return False
    return True


CAPTURES = [
    p
    for p in sorted([*REAL.iterdir(), *(FIXTURES / "captures").rglob("*")])
    if p.is_file() and p.suffix != ".tsv" and _recognised(p)
]


@pytest.mark.parametrize("command", ["check", "facts"])
@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_piped_text_has_no_markup(command: str, path: Path) -> None:
    """Rich markup is rendered, never printed: not "([dim]unknown[/dim])" for an unknown fact."""
    result = run(command, "--from", str(path))
    assert result.exit_code in (0, 1), result.stderr
    assert not MARKUP.search(result.stdout), MARKUP.findall(result.stdout)


def test_piped_check_prints_unknown_as_a_word() -> None:
    """The installed command, its stdout a pipe: an nvcc whose source is unknown."""
    path = FIXTURES / "captures" / "nvcc" / "version__ci_debian12_13.0.88.txt"
    done = subprocess.run(
        [str(GPUPROV), "check", "--from", str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "13.0.88 (unknown)" in done.stdout
    assert not MARKUP.search(done.stdout), MARKUP.findall(done.stdout)


HOST = "gpu-box-7"
FQDN = f"{HOST}.lab.example.com"


def _facts_naming_the_host(tmp_path: Path) -> Path:
    """A facts JSON from the remote probes of HOST: its name in sources, a probe's detail and the
    hostname fact."""
    facts = gate.facts_from_output(HOST, "")
    facts.system.hostname = FQDN
    facts.probes[0].detail = f"ssh {FQDN}: connection refused"
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(to_dict(facts)))
    return path


@pytest.mark.parametrize(
    "options",
    [("facts", "--json"), ("facts",), ("check", "--json"), ("check",)],
    ids=" ".join,
)
def test_redact_removes_the_hostname_everywhere(tmp_path: Path, options: tuple[str, ...]) -> None:
    path = str(_facts_naming_the_host(tmp_path))
    plain = run(*options, "--from", path).stdout
    assert HOST in plain
    redacted = run(*options, "--redact", "--from", path).stdout
    assert HOST not in redacted and "lab.example.com" not in redacted, redacted
    assert f"probes on {REDACTED}" in redacted


def test_redacted_local_facts_do_not_name_this_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket, "gethostname", lambda: FQDN)
    facts = gather.gather(probes=[])
    assert FQDN in json.dumps(to_dict(facts))
    data = redact(to_dict(facts))
    assert FQDN not in json.dumps(data)
    assert data["sources"] == [f"local probes on {REDACTED}"]


def test_redact_keeps_words_that_merely_contain_the_hostname() -> None:
    data = {"system": {"hostname": "gpu"}, "sources": ["local probes on gpu"], "note": "gpus, gpu"}
    assert redact(data) == {
        "system": {"hostname": REDACTED},
        "sources": [f"local probes on {REDACTED}"],
        "note": f"gpus, {REDACTED}",
    }


def test_gpu_table_keeps_every_column_and_says_when_nvidia_smi_ran() -> None:
    """An H100's facts (tests/fixtures/recorded/h100-vm): at 80 columns the bus id and the MIG
    column wrap instead of being cut, and nvidia-smi, which answered there, had no error; a
    pasted table says nothing of that run, so it stays unknown."""
    recorded = FIXTURES / "recorded" / "h100-vm"
    result = run("check", "--from", str(recorded / "facts_json__h100-vm_580.159.04.json"))
    assert result.exit_code == 0, result.stderr
    assert "00:06.0" in result.stdout and "Disabled" in result.stdout
    assert re.search(r"nvidia-smi error +none\b", result.stdout)
    pasted = run("check", "--from", str(recorded / "nvsmi_table__h100-vm_580.159.04.txt"))
    assert re.search(r"nvidia-smi error +unknown\b", pasted.stdout)


_NO_GPU_NAMED = (
    FIXTURES / "corpus" / "captures" / ("nvc_info_debug_firmware_path__nct-251_460.91.03.txt")
)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("No devices were found\n", "GPUs: none found"),
        (_NO_GPU_NAMED.read_text(), "GPUs: none named in what was read"),
    ],
    ids=["nvidia-smi-no-devices", "nvc-debug-lines"],
)
def test_no_gpu_is_found_only_where_nvidia_smi_looked(tmp_path: Path, text: str, said: str) -> None:
    """nvidia-smi's own "No devices were found" is no GPU; a capture that names none is unknown."""
    path = tmp_path / "capture.txt"
    path.write_text(text)
    result = run("check", "--from", str(path))
    assert result.exit_code in (0, 1), result.output
    assert said in result.stdout
