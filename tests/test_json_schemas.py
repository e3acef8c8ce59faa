"""The JSON contract: every `--json` output carries schema_version and validates against its
committed schema (checks/reporting/schemas/), and every command that takes --json has one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import typer.main
from pytest import CaptureFixture

from checks.facts.model import HostFacts, from_dict
from checks.reporting import schema
from provision import gate, stack, verify
from provision.cli import app
from provision.converge_cli import Converge
from provision.deploy import HostOutcome, OpResult, Run
from provision.output import emit
from tests.conftest import FIXTURES, REAL
from tests.support import tiny_gguf
from tests.test_gate_vllm import R1, R2, judged

GPUPROV = Path(sys.executable).parent / "gpuprov"
# The schema each command's --json follows: checks/reporting/schemas/<kind>.schema.json.
SCHEMA_OF = {
    "check": ("report", "fleet"),  # one host, or every host of an inventory
    "facts": ("facts",),
    "explain": ("explain",),
    "rules": ("rules",),
    "plan": ("converge",),
    "apply": ("converge",),
    "uninstall": ("converge",),
    "fit": ("fit",),
    "status": ("status",),
    "logs": ("logs",),
    "bench": ("bench",),
}
# apply and uninstall change hosts, bench needs a live server: their JSON is checked on runs made
# elsewhere (test_apply_json below, tests/e2e/test_apply_llama.py, tests/test_bench.py).
CHANGES_HOSTS = {"apply", "uninstall", "bench"}
RTX_3060 = str(REAL / "nvsmi_xml__telegraf_rtx-3060-v12.xml")
RTX_5090_OLD_DRIVER = str(FIXTURES / "rules" / "DRV-004" / "fail.json")
LOGS = [str(p) for p in sorted(REAL.glob("err*.txt"))]
# One host planned here (a build, no servers: no systemd needed), one that refuses the connection.
INVENTORY = """\
hosts = [("@local", {"llama_server_profiles": []}), ("127.0.0.1", {"ssh_port": 1})]
"""
# One llama-server profile here, for `logs` (its journal may not exist here: an error entry).
ONE_SERVICE = """\
main = {"name": "main", "model": "/m.gguf", "port": 8080}
hosts = [("@local", {"llama_server_profiles": [main]})]
"""
# Runs of the real command line; "{facts}" and "{inventory}" are files written per test.
RUNS: dict[str, list[tuple[str, list[str]]]] = {
    "check": [
        ("report", ["check", "--from", RTX_3060, "--json"]),
        ("report", ["check", "--from", "{facts}", "--json", "--redact"]),
        ("fleet", ["check", "{inventory}", "--json"]),
    ],
    "facts": [
        ("facts", ["facts", "--from", RTX_3060, "--json"]),
        ("facts", ["facts", "--from", "{facts}", "--json"]),
    ],
    "explain": [
        ("explain", ["explain", "--json", *LOGS]),
        ("explain", ["explain", "--json", LOGS[0], "--from", RTX_3060]),
    ],
    "rules": [("rules", ["rules", "--json"]), ("rules", ["rules", "CTR-002", "--json"])],
    "plan": [("converge", ["plan", "{inventory}", "--json"])],
    "fit": [
        ("fit", ["fit", "{model}", "--ctx", "512", "--from", RTX_3060, "--json"]),
        ("fit", ["fit", "{model}", "--ctx", "512", "--gpu", "tiny:100", "--json"]),
    ],
    "status": [("status", ["status", "{inventory}", "--json"])],
    "logs": [("logs", ["logs", "{one_service}", "main", "--json"])],
}
CASES = [(kind, argv) for runs in RUNS.values() for kind, argv in runs]


def json_commands() -> set[str]:
    """The commands of the typer app that take --json."""
    group = typer.main.get_command(app)
    assert isinstance(group, typer.main.TyperGroup)
    return {
        name
        for name, command in group.commands.items()
        if any("--json" in getattr(p, "opts", ()) for p in command.params)
    }


def gpuprov(argv: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    case = json.loads(Path(RTX_5090_OLD_DRIVER).read_text())
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps({"schema_version": 1, "driver": {}, **case["facts"]}))
    inventory = tmp_path / "inv.py"
    inventory.write_text(INVENTORY)
    one_service = tmp_path / "one.py"
    one_service.write_text(ONE_SERVICE)
    model = tiny_gguf.write(tmp_path / "model.gguf")
    args = [
        a.format(facts=facts, inventory=inventory, model=model, one_service=one_service)
        for a in argv
    ]
    return subprocess.run(
        [str(GPUPROV), *args], capture_output=True, text=True, timeout=120, check=False
    )


def validated(kind: str, data: Any) -> dict[str, Any]:
    jsonschema.validate(data, schema.committed(kind))
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize("kind", list(schema.SCHEMAS))
def test_committed_schema_is_current(kind: str) -> None:
    """Regenerate with `python -m checks.reporting.schema --write`."""
    assert schema.committed(kind) == schema.SCHEMAS[kind]()


def test_the_schema_folder_holds_exactly_the_generated_kinds() -> None:
    found = {p.name for p in schema.path("report").parent.glob("*.schema.json")}
    assert found == {f"{kind}.schema.json" for kind in schema.SCHEMAS}


def test_every_command_with_json_has_a_schema_and_a_run() -> None:
    """apply changes hosts: its JSON is checked on a run made in test_apply_json below."""
    assert json_commands() == set(SCHEMA_OF)
    assert {kind for kinds in SCHEMA_OF.values() for kind in kinds} == set(schema.SCHEMAS)
    assert set(RUNS) == set(SCHEMA_OF) - CHANGES_HOSTS
    assert all(kind in SCHEMA_OF[command] for command, runs in RUNS.items() for kind, _ in runs)


@pytest.mark.parametrize(("kind", "argv"), CASES, ids=[" ".join(a) for _, a in CASES])
def test_json_output_validates_against_the_committed_schema(
    kind: str, argv: list[str], tmp_path: Path
) -> None:
    done = gpuprov(argv, tmp_path)
    assert done.returncode in (0, 1), done.stderr
    data = validated(kind, json.loads(done.stdout))
    without_version = {k: v for k, v in data.items() if k != "schema_version"}
    with pytest.raises(jsonschema.ValidationError):
        validated(kind, without_version)
    with pytest.raises(jsonschema.ValidationError):
        validated(kind, {**data, "unexpected": True})


@pytest.mark.parametrize(("kind", "argv"), CASES, ids=[" ".join(a) for _, a in CASES])
def test_without_json_the_same_run_prints_its_text_view(
    kind: str, argv: list[str], tmp_path: Path
) -> None:
    with_json = gpuprov(argv, tmp_path)
    text = gpuprov([a for a in argv if a != "--json"], tmp_path)
    assert text.returncode == with_json.returncode, text.stderr
    assert text.stdout.strip() and not text.stdout.lstrip().startswith("{")
    assert "Traceback" not in text.stderr


def test_plan_json_shows_the_planned_and_the_skipped_host(tmp_path: Path) -> None:
    data = json.loads(gpuprov(["plan", "{inventory}", "--json"], tmp_path).stdout)
    local, down = data["hosts"]["@local"], data["hosts"]["127.0.0.1"]
    assert data["applied"] is False
    assert local["skipped"] is None and local["build"]["name"].startswith("b")
    assert [f["rule"] for f in local["findings"]][:1] == ["GPU-001"]
    assert local["findings"][0]["fix"]  # the same Finding as in the check report
    assert down["skipped"] == "could not connect: Connection refused"
    assert down["operations"] == []


def test_apply_json(capsys: CaptureFixture[str]) -> None:
    """What apply prints: each host's gate, build, image, VRAM budget and operation results."""
    vllm = judged("host_dual3090_580", {"vllm_replicas": [R1, R2]})
    case = json.loads((FIXTURES / "stack" / "rtx3090-cuda12.8.json").read_text())
    profile = {"name": "main", "model": "/srv/models/m.gguf", "port": 8080}
    llama = gate.judge(
        "llama",
        from_dict(HostFacts, case["facts"]),
        stack.from_data({"llama_server_profiles": [profile]}),
    )
    outcomes = {
        "vllm": HostOutcome(
            "vllm",
            vllm,
            ops=[
                OpResult("Pull the image", "changed"),
                OpResult("Start qwen-1", "failed"),
                OpResult("Start qwen-2", "not run"),
            ],
        ),
        "llama": HostOutcome(
            "llama", llama, ops=[OpResult("Build", "changed")], verification=crash_loop()
        ),
        "down": HostOutcome("down", skipped="could not connect"),
    }
    run = Run("inv.py", state=None, plans={}, outcomes=outcomes)  # type: ignore[arg-type]
    emit(Converge(run, applied=True), as_json=True)
    data = validated("converge", json.loads(capsys.readouterr().out))
    hosts = data["hosts"]
    assert data["applied"] is True
    assert hosts["vllm"]["image"]["ref"] == "vllm/vllm-openai:v0.21.0"
    assert hosts["vllm"]["vram"]["fits"] is True and hosts["vllm"]["vram"]["table"]
    assert (hosts["vllm"]["changed"], hosts["vllm"]["failed"]) == (1, True)
    assert hosts["llama"]["build"]["cuda_architectures"] == ["86"]
    assert hosts["down"]["skipped"] == "could not connect"
    emit(Converge(run, applied=True), as_json=False)
    text = capsys.readouterr().out
    assert "vllm: 1 changed, 1 unchanged, 1 FAILED" in text
    assert "down: not changed: could not connect" in text
    check = hosts["llama"]["verification"]
    assert check["ok"] is False
    (unit,) = [u for u in check["units"] if not u["ok"]]
    assert unit["journal"][-1].startswith("RuntimeError")
    assert unit["diagnoses"][0]["rule"] == "CTR-002"
    assert "llama: 1 changed, 0 unchanged; services FAILING" in text
    assert "FAILING     gpuprov-llama-main.service: restarted 3 times" in text
    assert "CTR-002" in text and "| RuntimeError" in text


def crash_loop() -> verify.Verification:
    """A post-apply check in which one unit crash-looped with a real Error 804 in its journal."""
    journal = [
        (FIXTURES / "real" / "err804__vllm-4940_docker-run.txt").read_text().splitlines()[-1]
    ]
    journal[0] = journal[0].removeprefix('I use the command above to test and occur "').rstrip('"')
    return verify.Verification(
        10,
        [
            verify.UnitResult(
                "gpuprov-llama-main.service",
                False,
                "activating (auto-restart)",
                "restarted 3 times (last exit status 1)",
                3,
                journal,
                verify.diagnose(journal, None),
            ),
            verify.UnitResult("gpuprov-canary.timer", True, "active (waiting)", "active for 10s+"),
        ],
    )
