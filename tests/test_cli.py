"""The command line, run for real: exit codes, --json against its schema, --from, --redact."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

from checks.reporting import schema
from provision.cli import app, expand_from
from tests.conftest import FIXTURES, REAL

RULE_FIXTURES = FIXTURES / "rules"
GPUPROV = Path(sys.executable).parent / "gpuprov"
runner = CliRunner()


def run(*args: str, stdin: str | None = None) -> Any:
    return runner.invoke(app, expand_from(list(args)), input=stdin)


def facts_file(tmp_path: Path, rule_id: str, kind: str) -> Path:
    """A facts JSON built from a rule fixture, as `gpuprov facts --json` would write it."""
    case = json.loads((RULE_FIXTURES / rule_id / f"{kind}.json").read_text())
    path = tmp_path / f"{rule_id}-{kind}.json"
    path.write_text(json.dumps({"schema_version": 1, "driver": {}, **case["facts"]}))
    return path


def test_check_on_this_machine_runs_and_says_there_is_no_gpu() -> None:
    """This machine has no GPU: the real probes run and the report says so plainly."""
    done = subprocess.run([str(GPUPROV), "check"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "GPU-001" in done.stdout
    assert "No NVIDIA GPU" in done.stdout
    assert "-DGGML_CUDA=OFF" in done.stdout


def test_check_json_validates_against_the_schema() -> None:
    done = subprocess.run(
        [str(GPUPROV), "check", "--json"], capture_output=True, text=True, check=False
    )
    data = json.loads(done.stdout)
    jsonschema.validate(data, schema.committed("report"))
    assert data["schema_version"] == 2
    assert {r["topic"] for r in data["recommendations"]} >= {"PyTorch wheel index"}


def test_exit_1_when_an_error_finding_is_reached(tmp_path: Path) -> None:
    result = run("check", "--from", str(facts_file(tmp_path, "DRV-004", "fail")))
    assert result.exit_code == 1
    assert "DRV-004" in result.stdout


def test_fail_on_warning_and_never(tmp_path: Path) -> None:
    path = str(facts_file(tmp_path, "CTR-005", "fail"))
    assert run("check", "--from", path).exit_code == 0
    assert run("check", "--from", path, "--fail-on", "warning").exit_code == 1
    assert run("check", "--from", path, "--fail-on", "never").exit_code == 0


def test_clean_facts_exit_0(tmp_path: Path) -> None:
    result = run("check", "--from", str(facts_file(tmp_path, "DRV-004", "pass")), "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["findings"] == []


def test_missing_file_is_a_usage_error() -> None:
    result = run("check", "--from", "/nonexistent/nvidia-smi.txt")
    assert result.exit_code == 2
    assert "/nonexistent/nvidia-smi.txt" in result.stderr


def test_unrecognised_input_is_exit_2_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("nothing to see here\n")
    result = run("check", "--from", str(path))
    assert result.exit_code == 2
    assert "notes.txt" in result.stderr and "recognised" in result.stderr


def test_bad_facts_json_is_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "facts.json"
    path.write_text(json.dumps({"schema_version": 1, "driver": {}, "gpus": "eight"}))
    result = run("facts", "--from", str(path))
    assert result.exit_code == 2
    assert "gpus" in result.stderr


def test_bad_fail_on_is_a_usage_error() -> None:
    assert run("check", "--fail-on", "sometimes").exit_code == 2


def test_from_stdin_and_several_files_merge() -> None:
    table = (
        REAL / "nvsmi_table__triton-on-computecanada_a100-sxm4-40gb_550.144.03.txt"
    ).read_text()
    result = run(
        "facts",
        "--json",
        "--from",
        "-",
        str(REAL / "nvcc_version__flash-attn-1921_12.6.txt"),
        stdin=table,
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["driver"]["version"] == "550.144.03"
    assert [g["name"] for g in data["gpus"]] == ["NVIDIA A100-SXM4-40GB"]
    assert data["toolkits"][0]["release"] == "12.6"
    assert data["sources"] == ["<stdin>", str(REAL / "nvcc_version__flash-attn-1921_12.6.txt")]


def test_facts_json_roundtrips_through_from(tmp_path: Path) -> None:
    first = run("facts", "--json", "--from", str(REAL / "nvsmi_xml__telegraf_rtx-3060-v12.xml"))
    path = tmp_path / "facts.json"
    path.write_text(first.stdout)
    second = run("facts", "--json", "--from", str(path))
    assert json.loads(second.stdout)["gpus"] == json.loads(first.stdout)["gpus"]
    jsonschema.validate(json.loads(first.stdout), schema.committed("facts"))


def test_redact_drops_serials_uuids_and_hostnames() -> None:
    xml = str(REAL / "nvsmi_xml__telegraf_a100-sxm4-80gb-mig-v12.xml")
    plain = run("facts", "--json", "--from", xml).stdout
    assert "GPU-513536b6-7d19-9063-b049-1e69664bb298" in plain
    redacted = run("facts", "--json", "--redact", "--from", xml).stdout
    assert "513536b6" not in redacted and "1650522003820" not in redacted
    assert json.loads(redacted)["gpus"][0]["uuid"] == "<redacted>"


def test_rules_list_and_one_rule() -> None:
    listing = run("rules")
    assert listing.exit_code == 0 and "DRV-001" in listing.stdout and "LCPP-005" in listing.stdout
    one = run("rules", "ctr-002")
    assert one.exit_code == 0
    assert "Error 804" in one.stdout and "forward-compatibility.html" in one.stdout
    (as_json,) = json.loads(run("rules", "CTR-002", "--json").stdout)["rules"]
    assert as_json["severity"] == "error" and as_json["citations"]
    every = json.loads(run("rules", "--json").stdout)["rules"]
    assert as_json in every and "DRV-001" in {r["id"] for r in every}
    missing = run("rules", "XYZ-999")
    assert missing.exit_code == 2 and "XYZ-999" in missing.stderr


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["check", "--from", "a", "b", "--json"],
            ["check", "--from", "a", "--from", "b", "--json"],
        ),
        (["check", "--from", "-"], ["check", "--from", "-"]),
        (["check", "--json"], ["check", "--json"]),
        (["facts", "--from=a"], ["facts", "--from=a"]),
    ],
)
def test_from_takes_several_files(argv: list[str], expected: list[str]) -> None:
    assert expand_from(argv) == expected


# --- internal errors --------------------------------------------------------------------------

HINT = "; rerun with --debug for the traceback"
INVENTORY = 'boxes = [("box1", {"llama_server_profiles": []})]\n'


def internal(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *options: str, exc: Exception | None = None
) -> Any:
    """`gpuprov [options] plan INV` with deploy.start raising `exc` (a KeyError by default)."""
    from provision import deploy

    def start(path: str, limit: list[str] | None, diff: bool, **_: object) -> deploy.Run:
        raise exc or KeyError("gpu0")

    monkeypatch.setattr(deploy, "start", start)
    inventory = tmp_path / "inv.py"
    inventory.write_text(INVENTORY)
    return run(*options, "plan", str(inventory))


def test_internal_error_is_one_line_and_exit_3(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    result = internal(monkeypatch, tmp_path)
    assert result.exit_code == 3
    assert result.stderr.splitlines()[-1] == f"gpuprov: internal error: KeyError: 'gpu0'{HINT}"
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_debug_shows_the_traceback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    result = internal(monkeypatch, tmp_path, "--debug")
    assert result.exit_code == 3
    lines = result.stderr.splitlines()
    assert "Traceback (most recent call last):" in lines
    assert lines[-2:] == ["KeyError: 'gpu0'", "gpuprov: internal error: KeyError: 'gpu0'"]


def test_a_message_on_several_lines_stays_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    result = internal(monkeypatch, tmp_path, exc=RuntimeError("first\nsecond"))
    assert result.exit_code == 3
    assert (
        result.stderr.splitlines()[-1]
        == f"gpuprov: internal error: RuntimeError: first second{HINT}"
    )


def test_user_errors_keep_their_exit_codes() -> None:
    """Usage errors and known bad input are not internal errors."""
    assert run("plan").exit_code == 2  # missing argument
    assert run("check", "--fail-on", "sometimes").exit_code == 2
    assert run("--debug", "rules", "NOPE-001").exit_code == 2


@pytest.mark.parametrize("options", [(), ("--debug",)], ids=["line", "debug"])
def test_a_secret_in_an_internal_error_is_masked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, options: tuple[str, ...]
) -> None:
    """A secret read from the environment never reaches the error line or the traceback."""
    from provision import hostplan, stack

    secret = "sk-e2e-internal-error-key"
    monkeypatch.setenv("GPUPROV_TEST_KEY", secret)
    profile = {"name": "main", "model": "/m.gguf", "port": 8080, "api_key_env": "GPUPROV_TEST_KEY"}
    read = hostplan.secrets(stack.from_data({"llama_server_profiles": [profile]}))
    result = internal(monkeypatch, tmp_path, *options, exc=ValueError(f"bad env {read}"))
    assert result.exit_code == 3
    assert secret not in result.stderr + result.stdout
    assert "bad env {'main': '<secret>'}" in result.stderr.splitlines()[-1]
