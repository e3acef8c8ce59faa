"""The vllm role's unit and EnvironmentFile, rendered from validated stacks and read by systemd.

Real: the templates, systemd 252's unit parser (`systemd --test` for the argv it stores,
`systemd-analyze verify`) and ansible-playbook's template module with the role's filter plugin.
The engine binary is an executable stand-in in tmp (verify needs ExecStart's binary to exist); no
container runs here.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision import stack, templates, vllm
from tests.support import ansible_play
from tests.test_quoting import command_words, dump, needs_dump, needs_verify, verify

ROOT = Path(__file__).resolve().parent.parent
IMAGE = "vllm/vllm-openai:v0.21.0-cu129"
TOKEN = 'hf_s3cr"et $HOME'
REPLICA = {
    "name": "qwen-1",
    "model": "Lorbus/Qwen3.6-27B-int4-AutoRound",
    "served_model_name": "qwen36-27b",
    "port": 8500,
    "gpus": [0],
    "gpu_memory_utilization": 0.92,
    "max_num_seqs": 2,
    "kv_cache_dtype": "fp8_e5m2",
    "speculative_config": {"method": "mtp", "num_speculative_tokens": 3},
    "hf_token_env": "HF_TOKEN",
    "env": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,max_split_size_mb:512"},
    "extra_args": ["--reasoning-parser", "qwen3"],
}
LOCAL = {"name": "local", "model": "/srv/models/My Model", "port": 8600, "gpus": [0, 1]}


@pytest.fixture
def engine(tmp_path: Path) -> Path:
    binary = tmp_path / "docker"
    binary.write_text("#!/bin/sh\nexit 0\n")
    binary.chmod(0o755)
    return binary


def host_data(engine: Path, *replicas: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"vllm_engine": str(engine), "vllm_replicas": list(replicas), **more}


def unit(
    data: dict[str, Any], index: int = 0, persistenced: bool = False, systemd_version: int = 252
) -> str:
    r = stack.from_data(data).vllm.replicas[index]
    return templates.render(
        "vllm",
        "vllm.service.j2",
        replica=dataclasses.asdict(r),
        image=IMAGE,
        nvidia_persistenced=persistenced,
        systemd_version=systemd_version,
        **stack.variables(data),
    )


def env_file(data: dict[str, Any], index: int = 0, token: str = "", key: str = "") -> str:
    r = stack.from_data(data).vllm.replicas[index]
    return templates.render(
        "vllm", "vllm.env.j2", replica=dataclasses.asdict(r), hf_token=token, api_key=key
    )


def test_run_args_exact(engine: Path) -> None:
    r = stack.from_data(host_data(engine, REPLICA)).vllm.replicas[0]
    settings = stack.from_data(host_data(engine, REPLICA)).vllm
    assert vllm.run_args(r, settings, IMAGE) == [
        str(engine),
        *("run", "--rm", "--name", "gpuprov-vllm-qwen-1", "--pull", "never"),
        *("--gpus", '"device=0"', "--ipc", "host", "--shm-size", "16g"),
        *("-p", "127.0.0.1:8500:8000"),
        *("-v", "/var/cache/gpuprov/huggingface:/root/.cache/huggingface"),
        *("-e", "PYTORCH_CUDA_ALLOC_CONF", "-e", "HF_TOKEN"),
        IMAGE,
        *("--model", "Lorbus/Qwen3.6-27B-int4-AutoRound", "--served-model-name", "qwen36-27b"),
        *("--host", "0.0.0.0", "--port", "8000", "--gpu-memory-utilization", "0.92"),
        *("--tensor-parallel-size", "1", "--max-num-seqs", "2", "--kv-cache-dtype", "fp8_e5m2"),
        *("--speculative-config", '{"method":"mtp","num_speculative_tokens":3}'),
        *("--reasoning-parser", "qwen3"),
    ]


def test_local_model_is_mounted_read_only_and_gpus_by_cdi(engine: Path) -> None:
    data = host_data(engine, LOCAL, vllm_gpu_selection="cdi")
    s = stack.from_data(data)
    args = vllm.run_args(s.vllm.replicas[0], s.vllm, IMAGE)
    assert args[args.index("--device") : args.index("--device") + 4] == [
        *("--device", "nvidia.com/gpu=0", "--device", "nvidia.com/gpu=1"),
    ]
    assert "--gpus" not in args
    assert args[args.index("/srv/models/My Model:/srv/models/My Model:ro") - 1 :][:2] == [
        "-v",
        "/srv/models/My Model:/srv/models/My Model:ro",
    ]
    assert args[args.index("--tensor-parallel-size") + 1] == "2"


@needs_dump
def test_argv_as_systemd_reads_it(engine: Path) -> None:
    data = host_data(engine, REPLICA)
    s = stack.from_data(data)
    settings = dump({"gpuprov-vllm-qwen-1.service": unit(data)}, "gpuprov-vllm-qwen-1.service")
    expected = vllm.run_args(s.vllm.replicas[0], s.vllm, IMAGE)
    assert [command_words(line) for line in settings["Command Line"]] == [
        [str(engine), "rm", "-f", "gpuprov-vllm-qwen-1"],
        expected,
        [str(engine), "stop", "-t", "30", "gpuprov-vllm-qwen-1"],
    ]
    assert settings["EnvironmentFile"] == ["/etc/gpuprov/vllm/qwen-1.env"]
    assert settings["Restart"] == ["always"]


def test_token_only_in_the_env_file(engine: Path) -> None:
    data = host_data(engine, REPLICA)
    text = unit(data)
    env = env_file(data, token=TOKEN)
    assert "hf_s3cr" not in text
    assert 'HF_TOKEN="hf_s3cr\\"et $HOME"' in env.splitlines()
    assert 'PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True,max_split_size_mb:512"' in env
    assert "HF_TOKEN" not in env_file(data)


def test_stop_and_cleanup_name_the_container(engine: Path) -> None:
    text = unit(host_data(engine, REPLICA))
    assert f'ExecStartPre=-{engine} rm -f "gpuprov-vllm-qwen-1"' in text.splitlines()
    assert f'ExecStop={engine} stop -t 30 "gpuprov-vllm-qwen-1"' in text.splitlines()
    assert "After=network-online.target docker.service" in text.splitlines()


@pytest.mark.parametrize(
    ("version", "limit", "steps"),
    [
        (0, ["StartLimitIntervalSec=300", "StartLimitBurst=5"], []),
        (252, ["StartLimitIntervalSec=300", "StartLimitBurst=5"], []),
        (254, ["StartLimitIntervalSec=0"], ["RestartSteps=5", "RestartMaxDelaySec=120"]),
    ],
)
def test_restarts_are_bounded_on_every_systemd(
    engine: Path, version: int, limit: list[str], steps: list[str]
) -> None:
    """A back-off from systemd 254; before it, a start limit the canary recovers from."""
    lines = unit(host_data(engine, REPLICA), systemd_version=version).splitlines()
    assert [line for line in lines if line.startswith("StartLimit")] == limit
    assert [line for line in lines if line.startswith(("RestartSteps", "RestartMax"))] == steps


@needs_verify
@pytest.mark.parametrize("version", [252, 254])
def test_systemd_verifies_the_units(tmp_path: Path, engine: Path, version: int) -> None:
    data = host_data(engine, REPLICA, LOCAL)
    paths = []
    for i, name in enumerate(("gpuprov-vllm-qwen-1.service", "gpuprov-vllm-local.service")):
        path = tmp_path / name
        path.write_text(unit(data, i, persistenced=True, systemd_version=version))
        paths.append(path)
    done = verify(*paths)
    assert done.returncode == 0, done.stderr


def test_ansible_renders_the_same_bytes(tmp_path: Path, engine: Path) -> None:
    """ansible-playbook renders the unit and env file from vllm_defaults | combine(item)."""
    data = host_data(engine, REPLICA)
    defaults = yaml.safe_load((ROOT / "roles/vllm/defaults/main.yml").read_text())
    merged = {**defaults["vllm_defaults"], **REPLICA}
    variables = {
        **stack.variables(data),
        "replica": merged,
        "image": IMAGE,
        "nvidia_persistenced": False,
        "systemd_version": 252,
        "hf_token": TOKEN,
        "api_key": "",
    }
    expected = {"unit": unit(data), "env": env_file(data, token=TOKEN)}
    sources = {"unit": "vllm/templates/vllm.service.j2", "env": "vllm/templates/vllm.env.j2"}
    written = ansible_play.render(tmp_path, sources, variables)
    for name, text in expected.items():
        assert written[name] == text.encode(), name
