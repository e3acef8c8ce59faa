"""The Docker and nvidia-smi stand-ins that end-to-end test hosts get in place of Docker and a GPU.

Test hosts have neither, so tests/support/standin_docker.py records docker calls and serves a small
OpenAI-compatible endpoint in place of a vLLM container, and tests/support/standin_nvidia_smi.py
answers gpuprov's probe from a GPU description. These tests run both here, without a test host:
what they print, their exit codes, their state, and that gpuprov's own parsers read them.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from checks.facts.parsers import nvidia_smi
from provision import vllm
from provision.stack import Replica, Vllm
from provision.testhost import hosts
from tests.support import standin_docker, standins

SUPPORT = Path(__file__).parent / "support"
DOCKER = SUPPORT / "standin_docker.py"
NVIDIA_SMI = SUPPORT / "standin_nvidia_smi.py"
FIXTURES = Path(__file__).parent / "fixtures"
GPUS = FIXTURES / "standin" / "gpus"
DOCKER_INFO = FIXTURES / "real" / "docker_info_json__llamaland_fedora41_nvidia-runtime-cdi.json"
IMAGE = "vllm/vllm-openai:v0.21.0"
IMAGE_ID = "sha256:" + "ab" * 32
API_KEY = "sk-test-key-never-logged"
HF_TOKEN = "hf_test_token_never_logged"
INSPECT: list[dict[str, Any]] = [
    {
        "Id": IMAGE_ID,
        "RepoTags": [IMAGE],
        "RepoDigests": ["vllm/vllm-openai@sha256:" + "cd" * 32],
        "Config": {
            "Env": ["PATH=/usr/bin", "CUDA_VERSION=13.0.1", "NVIDIA_REQUIRE_CUDA=cuda>=13.0"]
        },
        "RootFS": {"Type": "layers", "Layers": ["sha256:" + "01" * 32, "sha256:" + "02" * 32]},
    }
]
SAFETY = 30.0  # seconds: only for a stand-in that hangs, never a measurement


# --- the docker stand-in ---------------------------------------------------------------------


@dataclass
class Docker:
    """The stand-in with its own root and catalog."""

    root: Path
    env: dict[str, str]

    def __call__(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(DOCKER), *args],
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=SAFETY,
        )

    def calls(self) -> list[dict[str, Any]]:
        return standins.parse_calls((self.root / "calls.log").read_text())


@pytest.fixture
def docker(tmp_path: Path) -> Docker:
    catalog = tmp_path / "catalog"
    (catalog / "images").mkdir(parents=True)
    (catalog / "info.json").write_bytes(DOCKER_INFO.read_bytes())
    (catalog / "images" / "vllm-openai_v0.21.0.json").write_text(json.dumps(INSPECT))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "STANDIN_DOCKER_ROOT": str(tmp_path / "root"),
        "STANDIN_DOCKER_CATALOG": str(catalog),
    }
    return Docker(tmp_path / "root", env)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: Any


def http(port: int, path: str, body: Any = None, key: str | None = None) -> Reply:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data)
    request.add_header("Content-Type", "application/json")
    if key is not None:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=SAFETY) as reply:
            status, headers, raw = reply.status, dict(reply.headers), reply.read()
    except urllib.error.HTTPError as error:
        status, headers, raw = error.code, dict(error.headers), error.read()
    return Reply(status, headers, json.loads(raw) if raw else None)


@dataclass
class Container:
    """A `docker run` of the stand-in, in the background as a unit would run it."""

    name: str
    port: int
    process: subprocess.Popen[str]
    output: Path

    def log(self) -> str:
        return self.output.read_text()


def start(docker: Docker, name: str, port: int, *extra: str, **env: str) -> Container:
    args = [
        *("run", "--rm", "--name", name, "--pull", "never", "--gpus", '"device=0"'),
        *("--ipc", "host", "--shm-size", "16g", "-p", f"127.0.0.1:{port}:8000"),
        *("-v", "/tmp/hf:/root/.cache/huggingface", *extra, IMAGE),
        *("--model", "Org/Model-27B", "--served-model-name", "model-27b"),
        *("--host", "0.0.0.0", "--port", "8000"),
    ]
    output = docker.root.parent / f"{name}.out"
    with open(output, "w") as out:
        process = subprocess.Popen(
            [sys.executable, str(DOCKER), *args],
            env={**docker.env, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    container = Container(name, port, process, output)
    deadline = time.monotonic() + SAFETY
    while "Uvicorn running" not in container.log():
        assert process.poll() is None, container.log()
        assert time.monotonic() < deadline, container.log()
        time.sleep(0.05)
    return container


@pytest.fixture
def container(docker: Docker) -> Iterator[Container]:
    assert docker("pull", IMAGE).returncode == 0
    running = start(
        docker,
        "gpuprov-vllm-a",
        free_port(),
        *("-e", "HF_TOKEN", "-e", "VLLM_API_KEY"),
        HF_TOKEN=HF_TOKEN,
        VLLM_API_KEY=API_KEY,
    )
    yield running
    if running.process.poll() is None:
        running.process.terminate()
        running.process.wait(SAFETY)


def test_pull_prints_docker_progress_and_keeps_the_image(docker: Docker) -> None:
    first = docker("pull", IMAGE)
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert lines[0] == "v0.21.0: Pulling from vllm/vllm-openai"
    assert "010101010101: Pulling fs layer" in lines
    assert "020202020202: Download complete" in lines
    assert "020202020202: Pull complete" in lines
    assert f"Digest: sha256:{'cd' * 32}" in lines
    assert lines[-2:] == [f"Status: Downloaded newer image for {IMAGE}", f"docker.io/{IMAGE}"]
    again = docker("pull", f"docker.io/{IMAGE}")
    assert again.returncode == 0
    assert f"Status: Image is up to date for {IMAGE}" in again.stdout
    assert "Pull complete" not in again.stdout


def test_pull_of_an_unknown_tag_is_docker_manifest_unknown(docker: Docker) -> None:
    done = docker("pull", "vllm/vllm-openai:v9.9.9")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "Error response from daemon: manifest for vllm/vllm-openai:v9.9.9 not found: "
        "manifest unknown: manifest unknown"
    )
    assert docker("image", "inspect", "vllm/vllm-openai:v9.9.9").returncode == 1


def test_inspect_finds_the_image_only_after_the_pull(docker: Docker) -> None:
    before = docker("image", "inspect", IMAGE)
    assert (before.returncode, before.stdout) == (1, "[]\n")
    assert before.stderr.strip() == f"Error response from daemon: No such image: {IMAGE}"
    docker("pull", IMAGE)
    after = docker("image", "inspect", IMAGE)
    assert after.returncode == 0
    assert json.loads(after.stdout) == INSPECT
    assert after.stdout.startswith('[\n    {\n        "Id": ')
    image_id = docker("image", "inspect", "--format", "{{.Id}}", IMAGE)
    assert image_id.stdout == f"{IMAGE_ID}\n"
    env = docker("image", "inspect", "--format", "{{json .Config.Env}}", IMAGE)
    assert env.stdout.strip() == (
        '["PATH=/usr/bin","CUDA_VERSION=13.0.1","NVIDIA_REQUIRE_CUDA=cuda\\u003e=13.0"]'
    )  # Go's encoder escapes ">"
    assert json.loads(env.stdout) == INSPECT[0]["Config"]["Env"]
    assert docker("image", "inspect", "--format", "{{.Id}}", "ab" * 6).stdout == f"{IMAGE_ID}\n"


def test_info_is_the_recorded_capture(docker: Docker) -> None:
    info = docker("info", "--format", "{{json .}}")
    assert info.returncode == 0
    assert "\n" not in info.stdout.strip()
    assert json.loads(info.stdout) == json.loads(DOCKER_INFO.read_text())
    assert docker("--version").stdout == "Docker version 28.2.2, build standin\n"


def test_run_of_an_image_not_pulled_exits_125(docker: Docker) -> None:
    done = docker("run", "--rm", "--pull", "never", "-p", "127.0.0.1:1:8000", IMAGE)
    assert done.returncode == 125
    assert f"No such image: {IMAGE}" in done.stderr
    implicit = docker("run", "--rm", IMAGE)
    assert implicit.returncode == 125
    assert f"Unable to find image '{IMAGE}' locally" in implicit.stderr
    assert not (docker.root / "containers").exists() or not any(
        (docker.root / "containers").iterdir()
    )


def test_container_answers_like_vllm_serve(container: Container) -> None:
    assert "INFO: standin for vllm serve: Uvicorn running on http://0.0.0.0:8000" in container.log()
    health = http(container.port, "/health")
    assert health.status == 200
    assert health.headers["X-Standin-Container"] == container.name
    models = http(container.port, "/v1/models", key=API_KEY)
    assert models.status == 200
    assert models.body["object"] == "list"
    assert [(m["id"], m["object"]) for m in models.body["data"]] == [("model-27b", "model")]
    body = {"model": "model-27b", "prompt": "Hi", "max_tokens": 1}
    completion = http(container.port, "/v1/completions", body, key=API_KEY)
    assert completion.status == 200
    assert completion.headers["X-Standin-Container"] == container.name
    assert completion.body["object"] == "text_completion"
    assert len(completion.body["choices"]) == 1
    assert completion.body["choices"][0]["text"]
    assert completion.body["usage"]["completion_tokens"] == 1
    chat = {"model": "model-27b", "messages": [{"role": "user", "content": "Hi"}]}
    reply = http(container.port, "/v1/chat/completions", chat, key=API_KEY)
    assert reply.status == 200
    assert reply.body["choices"][0]["message"]["role"] == "assistant"
    assert set(reply.body["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}
    other = http(container.port, "/v1/completions", {**body, "model": "other"}, key=API_KEY)
    assert other.status == 404


def test_api_key_from_dockers_environment_guards_the_v1_routes(container: Container) -> None:
    body = {"model": "model-27b", "prompt": "Hi", "max_tokens": 1}
    denied = http(container.port, "/v1/completions", body)
    assert denied.status == 401
    assert denied.headers["X-Standin-Container"] == container.name
    assert http(container.port, "/v1/completions", body, key="wrong").status == 401
    assert http(container.port, "/v1/models").status == 401
    assert http(container.port, "/health").status == 200  # vLLM leaves /health open
    assert http(container.port, "/v1/completions", body, key=API_KEY).status == 200


def test_a_delayed_reply_does_not_hold_up_other_requests(container: Container) -> None:
    body = {"model": "model-27b", "prompt": "Hi", "standin_delay": 10}
    slow: list[Reply | OSError] = []

    def wait_for_the_slow_reply() -> None:
        try:
            slow.append(http(container.port, "/v1/completions", body, key=API_KEY))
        except OSError as exc:  # the container stopped at the end of the test
            slow.append(exc)

    threading.Thread(target=wait_for_the_slow_reply, daemon=True).start()
    deadline = time.monotonic() + SAFETY
    while "delaying the reply" not in container.log():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert http(container.port, "/health").status == 200
    assert not slow  # still waiting while another request was answered


@pytest.mark.parametrize("gpu_selection", ["index", "cdi"])
def test_gpuprovs_own_command_line_runs(docker: Docker, gpu_selection: str) -> None:
    """The unit's ExecStart, as provision.vllm builds it, with every option it passes."""
    port = free_port()
    replica = Replica(
        name="r1",
        model="/models/Qwen",  # a local model adds a read-only volume
        served_model_name="qwen",
        port=port,
        gpus=(0, 1),
        max_num_seqs=2,
        enable_prefix_caching=True,
        speculative_config='{"method":"mtp","num_speculative_tokens":3}',
        hf_token_env="GPUPROV_HF",
        api_key_env="GPUPROV_KEY",
        env=(("VLLM_LOGGING_LEVEL", "INFO"),),
    )
    settings = Vllm(engine=str(DOCKER), gpu_selection=gpu_selection)
    args = vllm.run_args(replica, settings, IMAGE)
    docker("pull", IMAGE)
    output = docker.root.parent / "unit.out"
    env = {
        **docker.env,
        "HF_TOKEN": HF_TOKEN,
        "VLLM_API_KEY": API_KEY,
        "VLLM_LOGGING_LEVEL": "INFO",
    }
    with open(output, "w") as out:
        process = subprocess.Popen(
            [sys.executable, *args], env=env, stdout=out, stderr=out, text=True
        )
    running = Container(replica.container, port, process, output)
    try:
        deadline = time.monotonic() + SAFETY
        while "Uvicorn running" not in running.log():
            assert process.poll() is None and time.monotonic() < deadline, running.log()
            time.sleep(0.05)
        body = {"model": "qwen", "prompt": "Hi", "max_tokens": 1}
        reply = http(port, "/v1/completions", body, key=API_KEY)
        assert reply.status == 200
        assert reply.headers["X-Standin-Container"] == replica.container
    finally:
        docker("stop", "-t", "30", replica.container)
        assert process.wait(SAFETY) == 0
    run = next(c for c in docker.calls() if c["argv"][:1] == ["run"])
    assert run["argv"] == args[1:]
    assert set(run["env"]) == {"HF_TOKEN", "VLLM_API_KEY", "VLLM_LOGGING_LEVEL"}


def test_a_live_name_conflicts_with_exit_125(docker: Docker, container: Container) -> None:
    done = docker("run", "--rm", "--name", container.name, "--pull", "never", IMAGE)
    assert done.returncode == 125
    assert f'Conflict. The container name "/{container.name}" is already in use' in done.stderr
    assert container.process.poll() is None


def test_stop_ends_the_container_with_exit_0(docker: Docker, container: Container) -> None:
    assert docker("ps", "--format", "{{.Names}}").stdout == f"{container.name}\n"
    record = json.loads((docker.root / "containers" / f"{container.name}.json").read_text())
    assert record["pid"] == container.process.pid
    assert record["env"] == ["HF_TOKEN", "VLLM_API_KEY"]
    stop = docker("stop", "-t", "10", container.name)
    assert (stop.returncode, stop.stdout) == (0, f"{container.name}\n")
    assert container.process.wait(SAFETY) == 0
    assert "Shutting down" in container.log()
    assert not (docker.root / "containers" / f"{container.name}.json").exists()
    assert docker("ps", "--format", "{{.Names}}").stdout == ""
    missing = docker("stop", container.name)
    assert missing.returncode == 1
    assert f"No such container: {container.name}" in missing.stderr


def test_rm_force_kills_the_container_and_frees_the_name(
    docker: Docker, container: Container
) -> None:
    assert docker("rm", container.name).returncode == 1  # running, and no -f
    removed = docker("rm", "-f", container.name)
    assert (removed.returncode, removed.stdout) == (0, f"{container.name}\n")
    assert container.process.wait(SAFETY) == -9
    assert docker("ps", "--format", "{{.Names}}").stdout == ""
    again = docker("rm", "-f", container.name)  # Docker 23+: reported, not an error
    assert again.returncode == 0
    assert again.stderr.strip() == (
        f"Error response from daemon: No such container: {container.name}"
    )
    assert docker("rm", container.name).returncode == 1
    restarted = start(docker, container.name, container.port)
    assert docker("stop", restarted.name).returncode == 0
    assert restarted.process.wait(SAFETY) == 0


def test_a_killed_container_leaves_a_name_that_a_new_run_takes(
    docker: Docker, container: Container
) -> None:
    container.process.kill()  # what `kill -9` of the unit's main process does
    container.process.wait(SAFETY)
    assert docker("ps", "--format", "{{.Names}}").stdout == ""
    restarted = start(docker, container.name, container.port)
    assert http(restarted.port, "/health").headers["X-Standin-Container"] == container.name
    docker("stop", restarted.name)
    assert restarted.process.wait(SAFETY) == 0


def test_calls_log_holds_names_and_hashes_never_values(docker: Docker, tmp_path: Path) -> None:
    env_file = tmp_path / "replica.env"
    env_file.write_text("# replica\nFROM_FILE=file-secret-value\nHF_TOKEN\n")
    docker("pull", IMAGE)
    port = free_port()
    running = start(
        docker,
        "gpuprov-vllm-b",
        port,
        *("--env-file", str(env_file), "-e", "VLLM_API_KEY", "-e", "INLINE=inline-secret"),
        *("-e", "UNSET_IN_DOCKER"),
        HF_TOKEN=HF_TOKEN,
        VLLM_API_KEY=API_KEY,
    )
    try:
        assert http(port, "/v1/models").status == 401  # the key reached "the container"
    finally:
        docker("stop", running.name)
        running.process.wait(SAFETY)
    text = (docker.root / "calls.log").read_text()
    for secret in (API_KEY, HF_TOKEN, "file-secret-value", "inline-secret"):
        assert secret not in text
    run = next(c for c in docker.calls() if c["argv"][:1] == ["run"])
    assert run["env"] == {
        name: hashlib.sha256(value.encode()).hexdigest()[:16]
        for name, value in (
            ("FROM_FILE", "file-secret-value"),
            ("HF_TOKEN", HF_TOKEN),
            ("INLINE", "inline-secret"),
            ("VLLM_API_KEY", API_KEY),
        )
    }
    assert "--env-file" in run["argv"] and "VLLM_API_KEY" in run["argv"]
    assert [c["argv"][0] for c in docker.calls()] == ["pull", "run", "stop"]


def test_redact_hashes_every_spelling_of_a_value_passed_inline() -> None:
    argv = ["run", "-e", "A=1", "--env=B=2", "-eC=3", "-e=D=4", "-e", "E", "--env=F", "img"]
    argv += ["--api-key", "k", "--hf-token=t", "--model", "m"]
    redacted = standin_docker.redact(argv)
    digest = standin_docker.digest
    assert redacted == [
        *("run", "-e", f"A=sha256:{digest('1')}", f"--env=B=sha256:{digest('2')}"),
        *(f"-eC=sha256:{digest('3')}", f"-e=D=sha256:{digest('4')}", "-e", "E", "--env=F"),
        *("img", "--api-key", f"sha256:{digest('k')}", f"--hf-token=sha256:{digest('t')}"),
        *("--model", "m"),
    ]


def test_an_unsupported_command_fails_loudly(docker: Docker) -> None:
    for args in (["build", "."], ["run", "-d", IMAGE], ["info"], []):
        done = docker(*args)
        assert done.returncode == 64, args
        assert done.stderr.startswith("standin docker: unsupported:"), args
    assert len(docker.calls()) == 4


# --- the nvidia-smi stand-in -----------------------------------------------------------------


def smi_path(tmp_path: Path) -> str:
    """A PATH whose first directory holds an `nvidia-smi` that runs the stand-in."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    wrapper = bin_dir / "nvidia-smi"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{NVIDIA_SMI}" "$@"\n')
    wrapper.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"


def sh(command: str, tmp_path: Path, config: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": smi_path(tmp_path), "STANDIN_NVIDIA_SMI_CONFIG": str(config)}
    return subprocess.run(
        ["/bin/sh", "-c", command], env=env, capture_output=True, text=True, timeout=SAFETY
    )


@pytest.mark.parametrize(
    ("description", "driver", "cuda"),
    [
        ("dual_rtx3090_570.json", "570.172.08", "12.8"),
        ("dual_rtx3090_580.json", "580.159.03", "13.0"),
    ],
)
def test_the_probe_reads_the_described_gpus(
    tmp_path: Path, description: str, driver: str, cuda: str
) -> None:
    done = sh(nvidia_smi.PROBE_COMMAND, tmp_path, GPUS / description)
    assert done.returncode == 0, done.stdout + done.stderr
    facts = nvidia_smi.parse_probe(done.stdout)
    assert (facts.driver.version, facts.driver.cuda_version) == (driver, cuda)
    assert [g.index for g in facts.gpus] == [0, 1]
    assert {g.name for g in facts.gpus} == {"NVIDIA GeForce RTX 3090"}
    assert {g.compute_capability for g in facts.gpus} == {"8.6"}
    assert {g.memory_total_mib for g in facts.gpus} == {24576}
    assert {g.architecture for g in facts.gpus} == {"Ampere"}
    assert len({g.pci_bus_id for g in facts.gpus}) == len({g.uuid for g in facts.gpus}) == 2


def test_an_old_driver_without_compute_cap_takes_the_fallback_query(tmp_path: Path) -> None:
    description = json.loads((GPUS / "dual_rtx3090_570.json").read_text())
    for gpu in description["gpus"]:
        del gpu["compute_cap"]
    config = tmp_path / "old.json"
    config.write_text(json.dumps(description))
    done = sh(nvidia_smi.PROBE_COMMAND, tmp_path, config)
    assert 'Field "compute_cap" is not a valid field to query.' in done.stdout
    assert ", ".join(nvidia_smi.PROBE_FIELDS_OLD[:3]) in done.stdout
    facts = nvidia_smi.parse_probe(done.stdout)
    assert [(g.name, g.memory_total_mib) for g in facts.gpus] == [
        ("NVIDIA GeForce RTX 3090", 24576)
    ] * 2
    assert {g.compute_capability for g in facts.gpus} == {None}
    assert facts.driver.version == "570.172.08"


def test_query_formats_and_an_unknown_field(tmp_path: Path) -> None:
    config = GPUS / "dual_rtx3090_580.json"
    csv = sh("nvidia-smi --query-gpu=memory.total,name --format=csv", tmp_path, config)
    assert csv.stdout.splitlines() == [
        "memory.total [MiB], name",
        "24576 MiB, NVIDIA GeForce RTX 3090",
        "24576 MiB, NVIDIA GeForce RTX 3090",
    ]
    bare = sh("nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits", tmp_path, config)
    assert bare.stdout == "24576\n24576\n"
    unknown = sh("nvidia-smi --query-gpu=index,bogus --format=csv", tmp_path, config)
    assert unknown.returncode == 2
    assert unknown.stdout.startswith('Field "bogus" is not a valid field to query.\n')


def test_list_table_and_version_read_as_real_output(tmp_path: Path) -> None:
    config = GPUS / "dual_rtx3090_580.json"
    listed = nvidia_smi.parse_list(sh("nvidia-smi -L", tmp_path, config).stdout)
    assert [(g.index, g.name) for g in listed.gpus] == [
        (0, "NVIDIA GeForce RTX 3090"),
        (1, "NVIDIA GeForce RTX 3090"),
    ]
    table = sh("nvidia-smi", tmp_path, config).stdout
    facts = nvidia_smi.parse_table(table)
    assert (facts.driver.version, facts.driver.cuda_version) == ("580.159.03", "13.0")
    assert [g.memory_total_mib for g in facts.gpus] == [24576, 24576]
    assert {len(line) for line in table.splitlines()[1:]} <= {89, 91}
    version = nvidia_smi.parse_version(sh("nvidia-smi --version", tmp_path, config).stdout)
    assert (version.driver.version, version.driver.cuda_version) == ("580.159.03", "13.0")


def test_no_description_reads_as_no_driver_and_odd_arguments_fail(tmp_path: Path) -> None:
    missing = sh(nvidia_smi.PROBE_COMMAND, tmp_path, tmp_path / "absent.json")
    facts = nvidia_smi.parse_probe(missing.stdout)
    assert facts.driver.smi_error == nvidia_smi.SMI_NO_DRIVER
    assert facts.gpus == []
    odd = sh("nvidia-smi -q -x", tmp_path, GPUS / "dual_rtx3090_580.json")
    assert odd.returncode == 64
    assert "standin nvidia-smi: unsupported" in odd.stderr


# --- installing them on a test host ----------------------------------------------------------


@pytest.fixture
def fake_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> hosts.TestHost:
    """A test host whose "SSH" runs the command locally, with tmp_path/host as its /."""
    root = tmp_path / "host"
    root.mkdir()

    def ssh_command(host: hosts.TestHost, *remote: str) -> list[str]:
        command = " ".join(remote)
        assert command.startswith("cd / && ")
        return ["/bin/sh", "-c", f"cd {root} && {command.removeprefix('cd / && ')}"]

    monkeypatch.setattr(hosts, "ssh_command", ssh_command)
    return hosts.TestHost(
        "fake", 1, "10.213.1.2", "c", "gp-fake", tmp_path / "key", tmp_path / "known_hosts"
    )


def test_install_puts_both_stand_ins_and_their_data_in_place(
    fake_host: hosts.TestHost, tmp_path: Path
) -> None:
    image = tmp_path / "vllm-openai_v0.21.0.json"
    image.write_text(json.dumps(INSPECT))
    gpus = GPUS / "dual_rtx3090_580.json"
    standins.install(fake_host, gpus=gpus, images=[image], docker_info=DOCKER_INFO)
    root = tmp_path / "host"
    for path in ("usr/local/bin/docker", "usr/bin/nvidia-smi"):
        assert (root / path).stat().st_mode & 0o777 == 0o755
    assert (root / "etc/standin-nvidia-smi/gpus.json").read_bytes() == gpus.read_bytes()
    assert (root / "etc/standin-docker/info.json").read_bytes() == DOCKER_INFO.read_bytes()
    assert (root / "etc/standin-docker/images" / image.name).read_text() == image.read_text()
    assert standins.calls(fake_host) == []
    env = {
        "STANDIN_DOCKER_ROOT": str(root / "var/lib/standin-docker"),
        "STANDIN_DOCKER_CATALOG": str(root / "etc/standin-docker"),
    }
    pulled = subprocess.run(
        [sys.executable, str(root / "usr/local/bin/docker"), "pull", IMAGE],
        env=env,
        capture_output=True,
        timeout=SAFETY,
    )
    assert pulled.returncode == 0
    assert standins.calls(fake_host) == [{"argv": ["pull", IMAGE], "env": {}}]


def test_the_bundle_holds_only_stand_in_paths() -> None:
    data = standins.bundle(gpus=GPUS / "dual_rtx3090_570.json", images=[], docker_info=DOCKER_INFO)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        names = set(tar.getnames())
    assert names == {
        "usr/local/bin/docker",
        "usr/bin/nvidia-smi",
        "etc/standin-docker",
        "etc/standin-docker/images",
        "etc/standin-docker/info.json",
        "etc/standin-nvidia-smi",
        "etc/standin-nvidia-smi/gpus.json",
        "var/lib/standin-docker",
    }
