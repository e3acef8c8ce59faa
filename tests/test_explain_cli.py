"""`gpuprov explain` run for real: inputs, exit codes, --json, host facts, and both scan paths."""

from __future__ import annotations

import io
import json
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from checks.logs import explain, logscan
from checks.reporting import schema
from provision.cli import app, expand_from
from tests.conftest import FIXTURES, REAL

runner = CliRunner()
LOGS = sorted(REAL.glob("err*.txt")) + sorted((FIXTURES / "signatures").glob("*/*.log"))


def run(*args: str, stdin: str | bytes | None = None) -> object:
    return runner.invoke(app, expand_from(list(args)), input=stdin)


def test_known_error_exits_1_with_rule_fix_and_evidence() -> None:
    result = run("explain", str(REAL / "err_containercli_cuda12.8__tabbyapi-324.txt"))
    assert result.exit_code == 1  # type: ignore[attr-defined]
    out = result.stdout  # type: ignore[attr-defined]
    assert "CTR-001" in out and "570.26" in out and "line 5" in out


def test_nothing_known_exits_0() -> None:
    result = run("explain", "-", stdin="listening on port 804\ntask 804 done\n")
    assert result.exit_code == 0  # type: ignore[attr-defined]
    assert "No known failure" in result.stdout  # type: ignore[attr-defined]


def test_unreadable_input_exits_2(tmp_path: Path) -> None:
    missing = run("explain", str(tmp_path / "nope.log"))
    assert missing.exit_code == 2  # type: ignore[attr-defined]
    assert "nope.log" in missing.stderr  # type: ignore[attr-defined]
    assert run("explain", str(tmp_path)).exit_code == 2  # type: ignore[attr-defined]
    assert run("explain").exit_code == 2  # type: ignore[attr-defined]


def test_docker_logs_without_a_daemon_is_unreadable() -> None:
    """No Docker engine here: `docker logs` fails, and explain says which source and why."""
    result = run("explain", "--docker", "vllm")
    assert result.exit_code == 2  # type: ignore[attr-defined]
    assert "docker logs vllm" in result.stderr  # type: ignore[attr-defined]


def test_json_lists_diagnoses_per_log() -> None:
    result = run(
        "explain",
        "--json",
        str(REAL / "err_workspace-locked__vllm-pr48179_moe-modular-kernel.txt"),
        str(REAL / "err804__vllm-4940_docker-run.txt"),
    )
    assert result.exit_code == 1  # type: ignore[attr-defined]
    data = json.loads(result.stdout)  # type: ignore[attr-defined]
    jsonschema.validate(data, schema.committed("explain"))
    assert data["schema_version"] == 1
    assert [log["diagnoses"][0]["rule"] for log in data["logs"]] == ["VLLM-002", "CTR-002"]
    first = data["logs"][0]["diagnoses"][0]
    assert first["evidence"][0][0] == 8 and "modular_kernel" in first["message"]
    assert first["citations"] and first["cause"]


def test_host_facts_from_captures_sharpen_the_fix(tmp_path: Path) -> None:
    """Error 804 in a log + a GeForce on driver 535 (from --from) + an image on CUDA 12.4."""
    log = tmp_path / "run.log"
    log.write_text(
        "$ docker run --gpus all nvidia/cuda:12.4.1-runtime-ubuntu22.04 python serve.py\n"
        "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda "
        "functions before calling NumCudaDevices() that might have already set an error? "
        "Error 804: forward compatibility was attempted on non supported HW\n"
    )
    facts = tmp_path / "facts.json"
    facts.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "driver": {"version": "535.183.01"},
                "gpus": [{"index": 0, "name": "NVIDIA GeForce RTX 4090"}],
            }
        )
    )
    result = run("explain", "--json", str(log), "--from", str(facts))
    data = json.loads(result.stdout)  # type: ignore[attr-defined]
    jsonschema.validate(data, schema.committed("explain"))
    (diagnosis,) = data["logs"][0]["diagnoses"]
    assert diagnosis["rule"] == "CTR-002"
    assert "NVIDIA GeForce RTX 4090 is a consumer GPU" in diagnosis["message"]
    assert diagnosis["fix"] == (
        "Upgrade the driver to >= 550.54.14, or use an image built on CUDA <= 12.2."
    )


@pytest.mark.parametrize("path", LOGS, ids=[f"{p.parent.name}/{p.name}" for p in LOGS])
def test_grep_and_python_paths_agree(path: Path) -> None:
    """The grep prefilter and the bytes.find prefilter find the same lines and hits."""
    with path.open("rb") as stream:
        fast = logscan.scan(stream)
    slow = logscan.scan(io.BytesIO(path.read_bytes()))
    assert {k: (h.count, h.evidence) for k, h in fast.hits.items()} == {
        k: (h.count, h.evidence) for k, h in slow.hits.items()
    }
    assert fast.fact_text == slow.fact_text
    assert [d.rule for d in explain.diagnose(fast)] == [d.rule for d in explain.diagnose(slow)]
