"""Secrets named by api_key_env / hf_token_env: a value no EnvironmentFile can hold, or none at
all, is refused by both engines, naming the variable and never showing the value."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from provision import deploy, hostplan, stack
from provision.stack import StackError
from tests.support import ansible_play
from tests.support.hostile import CONTROL

ROOT = Path(__file__).resolve().parent.parent
GPUPROV = ROOT / ".venv" / "bin" / "gpuprov"
PLAYBOOK = ROOT / ".venv" / "bin" / "ansible-playbook"
SECRET = "sk-0123456789abcdef"
PROFILE = {"name": "main", "model": "/srv/models/m.gguf", "port": 8080, "api_key_env": "GP_KEY"}
REPLICA = {"name": "rep", "model": "org/model", "port": 8101, "gpus": [0]}
# Every character no EnvironmentFile line may hold: controls, line breaks, a byte that is not
# UTF-8 (Python reads it from the environment as a lone surrogate).
BAD = [*CONTROL, *(chr(c) for c in range(0x80, 0xA0)), "\udcff"]
SECRET_FIELDS = [
    ({"llama_server_profiles": [PROFILE]}, "llama_server_profiles[0].api_key_env"),
    ({"vllm_replicas": [{**REPLICA, "hf_token_env": "GP_KEY"}]}, "vllm_replicas[0].hf_token_env"),
    ({"vllm_replicas": [{**REPLICA, "api_key_env": "GP_KEY"}]}, "vllm_replicas[0].api_key_env"),
]


@pytest.mark.parametrize(("data", "field"), SECRET_FIELDS)
@pytest.mark.parametrize("char", BAD, ids=ascii)
def test_a_secret_with_a_control_character_is_refused_unseen(
    data: dict[str, Any], field: str, char: str
) -> None:
    found = stack.from_data(data)
    for value in (SECRET + char, char + SECRET, f"sk-{char}0123456789"):
        with pytest.raises(StackError) as caught:
            hostplan.secrets(found, {"GP_KEY": value})
        assert caught.value.field == field
        assert (
            str(caught.value) == f"{field}: environment variable GP_KEY holds a control character"
        )


@pytest.mark.parametrize(("data", "field"), SECRET_FIELDS)
def test_a_secret_with_spaces_or_quotes_is_kept(data: dict[str, Any], field: str) -> None:
    value = f' {SECRET} "x" \\ $y %z '
    assert list(hostplan.secrets(stack.from_data(data), {"GP_KEY": value}).values()) == [value]


CLI_CASES = [
    *((*SECRET_FIELDS[0], char) for char in ("\r", "\t", "\n", "\x7f", "\x85", "\u2028", b"\xff")),
    (*SECRET_FIELDS[1], "\r"),
    (*SECRET_FIELDS[2], "\t"),
]


@pytest.mark.skipif(not GPUPROV.is_file(), reason="gpuprov not installed in .venv")
@pytest.mark.parametrize(("data", "field", "char"), CLI_CASES, ids=ascii)
def test_cli_plan_refuses_the_secret_without_showing_it(
    tmp_path: Path, data: dict[str, Any], field: str, char: str | bytes
) -> None:
    """Validation refuses it before any host is reached (192.0.2.1 would not answer)."""
    path = tmp_path / "inv.py"
    path.write_text(f"h = [('192.0.2.1', {data!r})]\n")
    raw = char if isinstance(char, bytes) else char.encode()
    env = {b"PATH": b"/usr/bin:/bin", b"GP_KEY": SECRET.encode() + raw}
    done = subprocess.run(
        [str(GPUPROV), "plan", str(path)], capture_output=True, env=env, timeout=120, check=False
    )
    out = (done.stdout + done.stderr).decode(errors="replace")
    assert done.returncode == 2, out
    assert f"{field}: environment variable GP_KEY holds a control character" in out
    assert SECRET not in out
    assert "Traceback" not in out


def test_unknown_keys_are_warned_once_with_the_closest_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "inv.py"
    path.write_text(
        "box = [\n"
        '  ("a", {"ngnix_lb_enabled": True, "my_notes": 1, "ssh_user": "root", "_sudo": True,\n'
        '         "ssh_port": 22, "ssh_known_hosts_file": "/k", "_sudo_password": "x"}),\n'
        '  ("b", {"ngnix_lb_enabled": True, "ssh_hostname": "b.lan"}),\n'
        "]\n"
    )
    _, _, hosts = deploy.load_inventory(str(path))
    assert list(deploy.validate(str(path), hosts)) == ["a", "b"]
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"gpuprov: warning: {path}: host 'a': 'my_notes' is no setting gpuprov or pyinfra knows, "
        "ignored",
        f"gpuprov: warning: {path}: host 'a': 'ngnix_lb_enabled' is no setting gpuprov or pyinfra "
        "knows, ignored (did you mean 'nginx_lb_enabled'?)",
    ]


def test_pyinfra_keys_come_from_pyinfra() -> None:
    keys = deploy.pyinfra_keys()
    assert {"ssh_user", "ssh_port", "ssh_key", "_sudo", "_sudo_user", "_su_user"} <= keys
    assert not any(k.startswith(tuple(stack.defaults())) for k in keys)


def role_check(role: str) -> list[dict[str, Any]]:
    """A role's tasks up to its secret check: what runs before anything is written."""
    tasks = yaml.safe_load((ROOT / "roles" / role / "tasks" / "main.yml").read_text())
    return tasks[:2]


def played(tmp_path: Path, role: str, data: dict[str, Any]) -> tuple[int, str]:
    """The role's tasks up to its secret check under ansible-playbook: what runs before anything
    is written; its exit status and its output, on one line."""
    tasks = yaml.safe_load((ROOT / "roles" / role / "tasks" / "main.yml").read_text())[:2]
    assert "ansible.builtin.assert" in tasks[1]
    done = ansible_play.run_local(tmp_path, tasks, {**stack.defaults(), **data})
    return done.returncode, " ".join((done.stdout + done.stderr).split())


# Each as a profile or replica of its own, so one run checks them all (a loop checks every item).
ANSIBLE_BAD = [*(c for c in BAD if c != "\x00"), None, ""]  # no environment holds a NUL


def bad_environment(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """GP_KEY_<i> for each of ANSIBLE_BAD (None: unset); the reason each is refused."""
    reasons = []
    for i, char in enumerate(ANSIBLE_BAD):
        if char is None:
            monkeypatch.delenv(f"GP_KEY_{i}", raising=False)
        else:
            monkeypatch.setenv(f"GP_KEY_{i}", SECRET + char if char else "")
        reasons.append("holds a control character" if char else "is not set on this machine")
    return reasons


@pytest.mark.skipif(not PLAYBOOK.is_file(), reason="no ansible-playbook")
def test_ansible_refuses_the_same_api_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every profile whose key is unset, empty or holds a control character is named; the value
    is never shown."""
    reasons = bad_environment(monkeypatch)
    monkeypatch.setenv("GP_KEY_OK", SECRET)
    profiles = [
        {**PROFILE, "name": f"p{i}", "port": 9000 + i, "api_key_env": f"GP_KEY_{i}"}
        for i in range(len(reasons))
    ]
    profiles.append({**PROFILE, "name": "good", "api_key_env": "GP_KEY_OK"})
    rc, out = played(tmp_path, "llama_server", {"llama_server_profiles": profiles})
    assert rc != 0, out
    for i, reason in enumerate(reasons):
        expected = f"llama_server_profiles (p{i}).api_key_env: environment variable GP_KEY_{i}"
        assert f"{expected} {reason}" in out
    assert "(good)" not in out.replace("item=good", "")
    assert SECRET not in out


@pytest.mark.skipif(not PLAYBOOK.is_file(), reason="no ansible-playbook")
def test_ansible_refuses_the_same_tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reasons = bad_environment(monkeypatch)
    monkeypatch.setenv("GP_KEY_OK", SECRET)
    replicas = [
        {**REPLICA, "name": f"r{i}", "hf_token_env": f"GP_KEY_{i}", "api_key_env": "GP_KEY_OK"}
        for i in range(len(reasons))
    ]
    replicas.append({**REPLICA, "name": "key", "api_key_env": "GP_KEY_0"})
    rc, out = played(tmp_path, "vllm", {"vllm_replicas": replicas})
    assert rc != 0, out
    for i, reason in enumerate(reasons):
        expected = f"vllm_replicas (r{i}).hf_token_env: environment variable GP_KEY_{i}"
        assert f"{expected} {reason}" in out
    assert f"vllm_replicas (key).api_key_env: environment variable GP_KEY_0 {reasons[0]}" in out
    assert "api_key_env: environment variable GP_KEY_OK" not in out
    assert SECRET not in out


@pytest.mark.skipif(not PLAYBOOK.is_file(), reason="no ansible-playbook")
@pytest.mark.parametrize(
    ("role", "data"),
    [
        (
            "llama_server",
            {
                "llama_server_profiles": [
                    PROFILE,
                    {**PROFILE, "name": "x", "port": 1, "api_key_env": ""},
                ]
            },
        ),
        ("vllm", {"vllm_replicas": [{**REPLICA, "hf_token_env": "GP_KEY"}, REPLICA]}),
    ],
)
def test_ansible_goes_on_with_every_secret_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, role: str, data: dict[str, Any]
) -> None:
    """Set secrets, and entries that name none, pass the check."""
    monkeypatch.setenv("GP_KEY", SECRET)
    rc, out = played(tmp_path, role, data)
    assert rc == 0, out
