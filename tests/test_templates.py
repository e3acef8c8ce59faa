"""The roles' templates rendered from validated stacks, read back by systemd, and by Ansible.

Real: the templates, `provision.templates.render`, systemd 252's unit parser offline and
ansible-playbook's template module. `systemd-analyze verify` needs no --root and does not look
User= up (gpuprov-llama does not exist here); it does need ExecStart's binary to exist and be
executable, so `llama_cpp_prefix` points at a tmp folder holding an executable stand-in
`current/bin/llama-server` (the canary's /usr/bin/python3 is real). The argv systemd stores comes
from `systemd --test --user` (see tests/test_quoting.py).
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from provision import stack, templates
from provision.quoting import QuotingError
from tests.support import ansible_play
from tests.test_quoting import command_words, dump, needs_dump, needs_verify, verify

ROOT = Path(__file__).resolve().parent.parent
KEY = 's3cr"et\\ $HOME'
MINIMAL = {"name": "main", "model": "/srv/models/m.gguf", "port": 8080}
FULL = {
    "name": "big",
    "model": "/srv/models/My Model (Q4).gguf",
    "alias": 'qwen "3" $HOME é',
    "port": 8081,
    "host": "0.0.0.0",
    "ctx_size": 32768,
    "parallel": 4,
    "gpu_layers": "all",
    "flash_attn": "on",
    "cache_type_k": "q8_0",
    "cache_type_v": "q8_0",
    "mlock": True,
    "threads": 8,
    "api_key_env": "GPUPROV_TEST_KEY",
    "extra_args": ["--jinja", "--chat-template-kwargs", '{"enable_thinking": false}', "a\\b"],
}


def _systemd_version() -> int:
    if shutil.which("systemd-analyze") is None:
        return 0
    out = subprocess.run(
        ["systemd-analyze", "--version"], capture_output=True, text=True, check=False
    ).stdout
    m = re.match(r"systemd (\d+)", out)
    return int(m.group(1)) if m else 0


LOCAL_SYSTEMD = _systemd_version()


@pytest.fixture
def prefix(tmp_path: Path) -> Path:
    """A llama.cpp prefix whose current/bin/llama-server is an executable stand-in."""
    root = tmp_path / "opt" / "llama.cpp"
    binary = root / "current" / "bin" / "llama-server"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\nexit 0\n")
    binary.chmod(0o755)
    return root


def host_data(prefix: Path, *profiles: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"llama_cpp_prefix": str(prefix), "llama_server_profiles": list(profiles), **more}


def unit(
    data: dict[str, Any], index: int = 0, systemd_version: int = 252, persistenced: bool = False
) -> str:
    p = stack.from_data(data).profiles[index]
    return templates.render(
        "llama_server",
        "llama-server.service.j2",
        profile=dataclasses.asdict(p),
        **stack.variables(data),
        systemd_version=systemd_version,
        nvidia_persistenced=persistenced,
        api_key=KEY,  # given, though the unit must not use it
    )


def env_file(data: dict[str, Any], api_key: str, index: int = 0) -> str:
    p = stack.from_data(data).profiles[index]
    return templates.render(
        "llama_server", "llama-server.env.j2", profile=dataclasses.asdict(p), api_key=api_key
    )


def canary(name: str, data: dict[str, Any]) -> str:
    profiles = [dataclasses.asdict(p) for p in stack.from_data(data).profiles]
    return templates.render("canary", name, profiles=profiles, **stack.variables(data))


def lines_of(text: str, key: str) -> list[str]:
    return [line.split("=", 1)[1] for line in text.splitlines() if line.startswith(f"{key}=")]


def test_minimal_unit_exact(prefix: Path) -> None:
    text = unit(host_data(prefix, MINIMAL))
    assert lines_of(text, "ExecStart") == [
        f'"{prefix}/current/bin/llama-server" "--model" "/srv/models/m.gguf" "--alias" "main"'
        ' "--host" "127.0.0.1" "--port" "8080" "--ctx-size" "4096" "--parallel" "1"'
        ' "--flash-attn" "auto" "--cache-type-k" "f16" "--cache-type-v" "f16"'
    ]
    assert lines_of(text, "User") == ["gpuprov-llama"]
    assert lines_of(text, "EnvironmentFile") == ["/etc/gpuprov/llama/main.env"]
    assert lines_of(text, "SyslogIdentifier") == ["gpuprov-llama-main"]
    assert lines_of(text, "Description") == ["llama.cpp server main (main on port 8080)"]
    assert text.endswith("WantedBy=multi-user.target\n")


@needs_dump
def test_full_profile_argv_as_systemd_reads_it(prefix: Path) -> None:
    text = unit(host_data(prefix, MINIMAL, FULL), index=1)
    settings = dump({"gpuprov-llama-big.service": text}, "gpuprov-llama-big.service")
    expected = [
        f"{prefix}/current/bin/llama-server",
        *("--model", "/srv/models/My Model (Q4).gguf", "--alias", 'qwen "3" $$HOME é'),
        *("--host", "0.0.0.0", "--port", "8081", "--ctx-size", "32768", "--parallel", "4"),
        *("--flash-attn", "on", "--cache-type-k", "q8_0", "--cache-type-v", "q8_0"),
        *("--n-gpu-layers", "all", "--threads", "8"),  # mlock: in the EnvironmentFile
        *("--jinja", "--chat-template-kwargs", '{"enable_thinking": false}', "a\\b"),
    ]
    assert [command_words(line) for line in settings["Command Line"]] == [expected]
    assert settings["Description"] == ['llama.cpp server big (qwen "3" $HOME é on port 8081)']
    assert settings["EnvironmentFile"] == ["/etc/gpuprov/llama/big.env"]
    assert settings["User"] == ["gpuprov-llama"]
    assert settings["LimitMEMLOCK"] == [str(2**64 - 1)]
    assert settings["Restart"] == ["always"]


@pytest.mark.parametrize(
    ("version", "steps"), [(0, False), (252, False), (253, False), (254, True)]
)
def test_restarts_are_bounded_on_every_systemd(prefix: Path, version: int, steps: bool) -> None:
    """A back-off from systemd 254; before it, a start limit the canary recovers from."""
    lines = unit(host_data(prefix, MINIMAL), systemd_version=version).splitlines()
    assert ("RestartSteps=5" in lines) is steps
    assert ("RestartMaxDelaySec=60" in lines) is steps
    limit = (
        ["StartLimitIntervalSec=0"] if steps else ["StartLimitIntervalSec=300", "StartLimitBurst=5"]
    )
    assert [line for line in lines if line.startswith("StartLimit")] == limit


@pytest.mark.parametrize("present", [True, False])
def test_after_persistenced_only_when_present(prefix: Path, present: bool) -> None:
    text = unit(host_data(prefix, MINIMAL), persistenced=present)
    after = "network-online.target" + (" nvidia-persistenced.service" if present else "")
    assert lines_of(text, "After") == [after]


@pytest.mark.parametrize("mlock", [True, False])
def test_memlock_limit_only_with_mlock(prefix: Path, mlock: bool) -> None:
    data = host_data(prefix, {**MINIMAL, "mlock": mlock})
    text = unit(data)
    assert lines_of(text, "LimitMEMLOCK") == (["infinity"] if mlock else [])
    assert '"--mlock"' not in text  # newer llama.cpp refuses it


@pytest.mark.parametrize("mlock", [True, False])
def test_mlock_reaches_either_build_through_the_env_file(prefix: Path, mlock: bool) -> None:
    """LLAMA_ARG_MLOCK for a build with --mlock, LLAMA_ARG_LOAD_MODE for one with --load-mode:
    llama.cpp reads the variables of the options it has."""
    text = env_file(host_data(prefix, {**MINIMAL, "mlock": mlock}), "")
    wanted = ['"1"', '"mmap+mlock"'] if mlock else []
    assert lines_of(text, "LLAMA_ARG_MLOCK") + lines_of(text, "LLAMA_ARG_LOAD_MODE") == wanted


def test_env_file_holds_the_key_only_when_given(prefix: Path) -> None:
    data = host_data(prefix, MINIMAL)
    with_key = env_file(data, KEY)
    assert with_key == (
        "# Managed by gpuprov; mode 0600, read by main's unit only.\n"
        'LLAMA_API_KEY="s3cr\\"et\\\\ $HOME"\n'
    )
    assert "LLAMA_API_KEY" not in env_file(data, "")


def test_api_key_never_in_the_unit(prefix: Path) -> None:
    data = host_data(prefix, MINIMAL, FULL)
    for index in (0, 1):
        text = unit(data, index, systemd_version=254, persistenced=True)
        assert "s3cr" not in text
        assert "GPUPROV_TEST_KEY" not in text


def test_control_characters_never_reach_a_unit(prefix: Path) -> None:
    """Validation stops them first; the filter is the second line of defence."""
    with pytest.raises(stack.StackError):
        stack.from_data(host_data(prefix, {**MINIMAL, "alias": "a\nExecStartPre=/bin/evil"}))
    profile = dataclasses.asdict(stack.from_data(host_data(prefix, MINIMAL)).profiles[0])
    profile["model"] = "/m\nExecStartPre=/bin/evil"
    with pytest.raises(QuotingError):
        templates.render(
            "llama_server",
            "llama-server.service.j2",
            profile=profile,
            **stack.variables(host_data(prefix, MINIMAL)),
            systemd_version=252,
            nvidia_persistenced=False,
        )


@needs_verify
@pytest.mark.parametrize("version", sorted({252, 254, LOCAL_SYSTEMD}))
@pytest.mark.parametrize("persistenced", [True, False])
def test_systemd_verifies_every_llama_unit(
    tmp_path: Path, prefix: Path, version: int, persistenced: bool
) -> None:
    """Clean on this systemd; a newer one's settings are the only complaint of an older one."""
    data = host_data(prefix, MINIMAL, FULL)
    paths = []
    for index, p in enumerate(stack.from_data(data).profiles):
        path = tmp_path / p.unit
        path.write_text(unit(data, index, version, persistenced))
        paths.append(path)
    done = verify(*paths)
    assert done.returncode == 0, done.stderr
    complaints = done.stderr.splitlines()
    if version <= LOCAL_SYSTEMD:
        assert complaints == []
    else:
        assert complaints
        for line in complaints:
            assert re.search(r"Unknown key '(RestartSteps|RestartMaxDelaySec)'", line), line


@needs_verify
def test_verify_fails_without_the_binary(tmp_path: Path, prefix: Path) -> None:
    """The verification above can fail: it resolves ExecStart's binary under the prefix."""
    path = tmp_path / "gpuprov-llama-main.service"
    path.write_text(unit(host_data(prefix, MINIMAL)))
    (prefix / "current" / "bin" / "llama-server").unlink()
    done = verify(path)
    assert done.returncode != 0
    assert f"{prefix}/current/bin/llama-server is not executable" in done.stderr


@needs_verify
@pytest.mark.skipif(not Path("/usr/bin/python3").is_file(), reason="no /usr/bin/python3")
def test_systemd_verifies_the_canary_units(tmp_path: Path, prefix: Path) -> None:
    data = host_data(prefix, MINIMAL, FULL, canary_interval=45, canary_timeout=7)
    paths = []
    for name in ("gpuprov-canary.service", "gpuprov-canary.timer"):
        path = tmp_path / name
        path.write_text(canary(f"{name}.j2", data))
        paths.append(path)
    done = verify(*paths)
    assert (done.returncode, done.stderr) == (0, "")
    service = paths[0].read_text()
    assert lines_of(service, "ExecStart") == [
        "/usr/bin/python3 /usr/local/lib/gpuprov/canary.py --config /etc/gpuprov/canary.tsv"
        " --state-dir /var/lib/gpuprov/canary --timeout 7 --failures 2 --cool-down 300"
        " --metrics-dir /var/lib/prometheus/node-exporter"
    ]
    # two profiles, each at most 2 x 7 s plus 5 s, 30 s to spare, and two nvidia-smi calls of
    # at most 15 s each for the GPU gauges
    assert lines_of(service, "TimeoutStartSec") == [str((7 * 2 + 5) * 2 + 30 + 30)]
    timer = paths[1].read_text()
    assert lines_of(timer, "OnActiveSec") == lines_of(timer, "OnUnitActiveSec") == ["45"]


def test_canary_targets(prefix: Path) -> None:
    data = host_data(prefix, MINIMAL, FULL, llama_server_config_dir="/etc/llama-cfg")
    rows = [
        line.split("\t")
        for line in canary("canary.tsv.j2", data).splitlines()
        if not line.startswith("#")
    ]
    assert rows == [
        [
            "gpuprov-llama-main.service",
            "http://127.0.0.1:8080",
            "main",
            "/etc/llama-cfg/main.env",
            "llama",
            "300",
            "resident",
        ],
        [
            "gpuprov-llama-big.service",
            "http://127.0.0.1:8081",  # 0.0.0.0 is reached on loopback
            'qwen "3" $HOME é',
            "/etc/llama-cfg/big.env",
            "llama",
            "300",
            "resident",
        ],
    ]


def test_canary_target_for_an_ipv6_host(prefix: Path) -> None:
    data = host_data(prefix, {**MINIMAL, "host": "::1", "port": 8082})
    (row,) = canary("canary.tsv.j2", data).splitlines()[1:]
    assert row.split("\t")[1] == "http://[::1]:8082"


@needs_dump
def test_percent_in_alias_reaches_description_as_written(prefix: Path) -> None:
    text = unit(host_data(prefix, {**MINIMAL, "alias": "50%n"}))
    settings = dump({"gpuprov-llama-main.service": text}, "gpuprov-llama-main.service")
    assert settings["Description"] == ["llama.cpp server main (50%n on port 8080)"]


def test_zero_gpu_layers_is_passed(prefix: Path) -> None:
    text = unit(host_data(prefix, {**MINIMAL, "gpu_layers": 0}))
    assert '"--n-gpu-layers" "0"' in text


def test_gpu_layers_string_zero_is_passed(prefix: Path) -> None:
    text = unit(host_data(prefix, {**MINIMAL, "gpu_layers": "0"}))
    assert '"--n-gpu-layers" "0"' in text


@needs_verify
def test_prefix_with_dollar_is_refused_or_works(tmp_path: Path) -> None:
    prefix = tmp_path / "a$b"
    binary = prefix / "current" / "bin" / "llama-server"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    try:
        text = unit(host_data(prefix, MINIMAL))
    except stack.StackError as exc:
        assert exc.field == "llama_cpp_prefix"
        return
    path = tmp_path / "gpuprov-llama-main.service"
    path.write_text(text)
    done = verify(path)
    assert (done.returncode, done.stderr) == (0, "")


@pytest.mark.skipif(
    not (ROOT / ".venv" / "bin" / "ansible-playbook").is_file(), reason="no ansible-playbook"
)
def test_ansible_renders_the_same_bytes(tmp_path: Path, prefix: Path) -> None:
    """One ansible-playbook run renders every template with gpuprov's filter plugin."""
    data = host_data(prefix, MINIMAL, FULL)
    profiles = [dataclasses.asdict(p) for p in stack.from_data(data).profiles]
    facts = {"systemd_version": 254, "nvidia_persistenced": True}
    variables = {
        **stack.variables(data),
        **facts,
        "profile": profiles[1],
        "profiles": profiles,
        "api_key": KEY,
    }
    expected = {
        "unit": unit(data, 1, systemd_version=254, persistenced=True),
        "env": env_file(data, KEY, 1),
        "tsv": canary("canary.tsv.j2", data),
        "service": canary("gpuprov-canary.service.j2", data),
        "timer": canary("gpuprov-canary.timer.j2", data),
    }
    sources = {
        "unit": "llama_server/templates/llama-server.service.j2",
        "env": "llama_server/templates/llama-server.env.j2",
        "tsv": "canary/templates/canary.tsv.j2",
        "service": "canary/templates/gpuprov-canary.service.j2",
        "timer": "canary/templates/gpuprov-canary.timer.j2",
    }
    written = ansible_play.render(tmp_path, sources, variables)
    for name, text in expected.items():
        assert written[name] == text.encode(), name
