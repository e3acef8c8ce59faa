"""gpuprov's gate, lock and ranges under Ansible: gpuprov_check and gpuprov_lock, the collection's
actions, and the roles' range checks.

Real: ansible-playbook with ansible/ansible.cfg (the roles and actions of the repository) on
localhost, connection local. The probes really run here for an unblocked host; a blocked one is
judged on recorded facts (tests/fixtures/stack/), fed through the action's documented test
switch GPUPROV_CHECK_PROBE_OUTPUT.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from checks.facts.model import HostFacts, from_dict
from provision import ansible_collection, build, gate, stack
from tests.conftest import FIXTURES

ROOT = Path(__file__).resolve().parent.parent
PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
pytestmark = pytest.mark.skipif(not PLAYBOOK.is_file(), reason="no ansible-core in this venv")
RTX5090 = FIXTURES / "stack" / "rtx5090-driver575-stale-tools.json"
PROFILE = {"name": "main", "model": "/srv/models/m.gguf", "port": 8080}
NVCC_13 = "/usr/local/cuda-13.0/bin/nvcc"


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    return {
        **base,
        "ANSIBLE_CONFIG": str(ROOT / "ansible" / "ansible.cfg"),
        "ANSIBLE_LOCALHOST_WARNING": "false",
        **extra,
    }


def play(
    tmp_path: Path,
    tasks: list[dict[str, Any]],
    variables: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
    name: str = "play.yml",
) -> subprocess.Popen[str]:
    """ansible-playbook running `tasks` on localhost, started (not waited for)."""
    (tmp_path / name).write_text(
        yaml.safe_dump(
            [{"hosts": "all", "gather_facts": False, "vars": variables or {}, "tasks": tasks}],
            sort_keys=False,
        )
    )
    inventory = f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}\n"
    (tmp_path / "hosts.ini").write_text(inventory)
    argv = [str(PLAYBOOK), "-i", str(tmp_path / "hosts.ini"), str(tmp_path / name)]
    return subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT / "ansible",
        env=environ or env(),
    )


def finished(process: subprocess.Popen[str]) -> tuple[int, str]:
    out, _ = process.communicate(timeout=300)
    return process.returncode, out


def run(tmp_path: Path, tasks: list[dict[str, Any]], **kw: Any) -> tuple[int, str]:
    return finished(play(tmp_path, tasks, **kw))


def write(tmp_path: Path, what: str, name: str = "out.json") -> dict[str, Any]:
    """A task writing `what` (Jinja) as JSON to tmp_path/name."""
    dest = str(tmp_path / name)
    return {"ansible.builtin.copy": {"content": f"{{{{ {what} | to_json }}}}", "dest": dest}}


def test_a_blocked_host_fails_with_the_rules_messages_and_fixes(tmp_path: Path) -> None:
    variables = {"llama_server_profiles": [PROFILE], "llama_cpp_cuda_compiler": NVCC_13}
    code, out = run(
        tmp_path,
        [{"gpuprov_check": {}}],
        variables=variables,
        environ=env(GPUPROV_CHECK_PROBE_OUTPUT=str(RTX5090)),
    )
    assert code != 0
    facts = from_dict(HostFacts, json.loads(RTX5090.read_text())["facts"])
    verdict = gate.judge("localhost", facts, stack.from_data(variables))
    assert {f.rule for f in verdict.blockers()} == {"DRV-001", "LCPP-001"}
    assert "gpuprov's gate blocks this host" in out
    for f in verdict.blockers():
        assert f.message in out and f.fix in out
    assert "ARCH-001 PyTorch" not in out.split("blocks this host", 1)[1]  # not blocking here


def test_skip_lets_a_blocked_host_through_with_the_plan(tmp_path: Path) -> None:
    variables = {
        "llama_server_profiles": [PROFILE],
        "llama_cpp_cuda_compiler": NVCC_13,
        "gpuprov_check_skip": True,
    }
    tasks = [
        {"gpuprov_check": {}, "register": "checked"},
        write(tmp_path, "[gpuprov_gate, checked]"),
    ]
    code, out = run(
        tmp_path, tasks, variables=variables, environ=env(GPUPROV_CHECK_PROBE_OUTPUT=str(RTX5090))
    )
    assert code == 0, out[-3000:]
    found, checked = json.loads((tmp_path / "out.json").read_text())
    assert found["blocked"] and found["skipped"]
    assert found["blockers"] == ["DRV-001", "LCPP-001"]
    assert (found["cuda_architectures"], found["nvcc"]) == ("120a", NVCC_13)
    assert {f["rule"] for f in checked["findings"] if f.get("blocks")} == {"DRV-001", "LCPP-001"}
    assert checked["facts"]["gpus"][0]["name"] == "NVIDIA GeForce RTX 5090"


def test_llama_cpp_builds_what_the_gate_planned(tmp_path: Path) -> None:
    """No architectures set: the role takes the gate's (sm_120a, nvcc 12.9) and names the build
    as gpuprov does."""
    tasks = [
        {"gpuprov_check": {}},
        {"ansible.builtin.include_role": {"name": "llama_cpp", "tasks_from": "plan"}},
        write(tmp_path, "[llama_cpp_build_name, llama_cpp_full_args]"),
    ]
    variables = {"llama_server_profiles": [PROFILE]}
    code, out = run(
        tmp_path, tasks, variables=variables, environ=env(GPUPROV_CHECK_PROBE_OUTPUT=str(RTX5090))
    )
    assert code == 0, out[-3000:]
    name, args = json.loads((tmp_path / "out.json").read_text())
    facts = from_dict(HostFacts, json.loads(RTX5090.read_text())["facts"])
    planned = gate.judge("localhost", facts, stack.from_data(variables))
    assert planned.plan is not None and planned.plan.archs == ("120a",)
    assert (name, args) == (planned.plan.name, list(planned.plan.cmake_args))
    assert "-DCMAKE_CUDA_COMPILER=/usr/local/cuda-12.9/bin/nvcc" in args


def test_the_probes_run_on_the_target(tmp_path: Path) -> None:
    """This machine, probed for real through the connection: what gpuprov would plan here."""
    tasks = [
        {"gpuprov_check": {}, "register": "checked"},
        write(tmp_path, "[gpuprov_gate, checked]"),
    ]
    variables = {"llama_server_profiles": [PROFILE]}
    code, out = run(tmp_path, tasks, variables=variables)
    assert code == 0, out[-3000:]
    found, checked = json.loads((tmp_path / "out.json").read_text())
    facts = from_dict(HostFacts, checked["facts"])
    assert facts.system.machine  # the system probe ran and was parsed
    expected = build.plan(stack.from_data(variables), facts, found["nvcc"])
    assert found["build_name"] == expected.name


def test_without_gpuprov_it_says_what_is_missing(tmp_path: Path) -> None:
    for name in ("provision", "checks"):
        (tmp_path / "stub" / name).mkdir(parents=True)
        (tmp_path / "stub" / name / "__init__.py").write_text('raise ImportError("absent")\n')
    environ = env(PYTHONPATH=str(tmp_path / "stub"))
    code, out = run(tmp_path, [{"gpuprov_check": {}}], environ=environ)
    assert code != 0
    assert "gpuprov_check needs gpuprov on the controller: pip install gpuprov" in out


def test_the_collection_names_its_actions_in_full() -> None:
    text = "- name: Gate\n  gpuprov_check: {}\n- gpuprov_lock:\n    state: held\nx: gpuprov_check\n"
    assert ansible_collection.qualified(text) == (
        "- name: Gate\n  gpuprov.inference.gpuprov_check: {}\n"
        "- gpuprov.inference.gpuprov_lock:\n    state: held\nx: gpuprov_check\n"
    )


@pytest.mark.parametrize(
    ("role", "variables", "message"),
    [
        ("canary", {"canary_interval": -5}, "canary_interval: must be an integer 5-86400, got -5"),
        (
            "llama_server",
            {"llama_server_profiles": [{**PROFILE, "port": 70000}]},
            "llama_server_profiles (main).port: must be an integer 1-65535, got 70000",
        ),
        ("nginx_lb", {"nginx_lb_listen": 70000}, "nginx_lb_listen: must be an integer 1-65535"),
        (
            "vllm",
            {
                "vllm_replicas": [
                    {
                        "name": "r",
                        "model": "m/m",
                        "port": 8000,
                        "gpus": [0],
                        "gpu_memory_utilization": 1.5,
                    }
                ]
            },
            "vllm_replicas (r).gpu_memory_utilization: must be a fraction in (0, 1], got 1.5",
        ),
    ],
)
def test_ranges_are_checked_before_anything_changes(
    tmp_path: Path, role: str, variables: dict[str, Any], message: str
) -> None:
    tasks = [{"ansible.builtin.include_role": {"name": role}}]
    code, out = run(tmp_path, tasks, variables=variables)
    assert code != 0
    assert message in out
    assert "Judge the host" not in out  # failed before the gate, before any change


def lock_tasks(path: Path, out: Path, timeout: int, hold_for: float, release: bool = True) -> Any:
    """Take the lock at `path`, write the owner to out/owner.json, sleep, release it."""
    tasks: list[Any] = [
        {"gpuprov_lock": {"path": str(path), "timeout": timeout}},
        write(out, "gpuprov_lock_owner", "owner.json"),
        {"ansible.builtin.command": f"sleep {hold_for}", "changed_when": False},
    ]
    if release:
        tasks.append({"gpuprov_lock": {"path": str(path), "state": "released"}})
    return tasks


def held(path: Path) -> bool:
    return subprocess.run(["flock", "-n", str(path), "true"], check=False).returncode != 0


def released(path: Path, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while held(path) and time.monotonic() < deadline:
        time.sleep(0.2)
    return not held(path)


def holding(path: Path) -> str:
    """Wait until a play holds the lock; its name."""
    deadline = time.monotonic() + 60
    while not (path.exists() and path.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return path.read_text().strip()


def test_two_plays_on_one_host_run_one_after_the_other(tmp_path: Path) -> None:
    lock = tmp_path / "run" / "apply.flock"
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    first = play(a, lock_tasks(lock, a, 30, 4))
    holder = holding(lock)
    assert holder.startswith("ansible-playbook ") and held(lock)  # flock(1), as gpuprov holds it
    started = time.time()
    second = play(b, lock_tasks(lock, b, 60, 0))
    code, out = finished(first)
    assert code == 0, out[-3000:]
    code, out = finished(second)
    assert code == 0, out[-3000:]
    assert json.loads((a / "owner.json").read_text()) == holder
    assert json.loads((b / "owner.json").read_text()) not in ("", holder)
    # the second play took it only once the first had slept and released it
    assert (b / "owner.json").stat().st_mtime - started > 3
    assert released(lock)


def test_a_play_that_waits_too_long_names_the_holder(tmp_path: Path) -> None:
    lock = tmp_path / "run" / "apply.flock"
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    first = play(a, lock_tasks(lock, a, 30, 6))
    holder = holding(lock)
    code, out = run(b, lock_tasks(lock, b, 1, 0))
    assert code != 0
    assert f"another apply holds {lock} ({holder}); waited 1 s" in out
    assert finished(first)[0] == 0


def test_a_play_that_fails_leaves_no_lock(tmp_path: Path) -> None:
    """The host failed before its release: the lock ends with the play (its connection)."""
    lock = tmp_path / "run" / "apply.flock"
    tasks = lock_tasks(lock, tmp_path, 30, 0, release=False)
    tasks.append({"ansible.builtin.fail": {"msg": "a role failed"}})
    code, _ = run(tmp_path, tasks)
    assert code != 0
    assert json.loads((tmp_path / "owner.json").read_text()).startswith("ansible-playbook ")
    assert released(lock)


def test_output_from_a_tty_is_read(tmp_path: Path) -> None:
    """become over SSH runs the probes on a tty, whose lines end with \\r\\n: still read."""
    from checks.facts import remote
    from checks.facts.gather import all_probes

    output = subprocess.run(
        ["sh", "-c", remote.script(all_probes())], capture_output=True, text=True, check=False
    ).stdout
    recorded = tmp_path / "probes.txt"
    recorded.write_bytes(output.replace("\n", "\r\n").encode())
    tasks = [{"gpuprov_check": {}, "register": "checked"}, write(tmp_path, "checked.facts")]
    code, out = run(tmp_path, tasks, environ=env(GPUPROV_CHECK_PROBE_OUTPUT=str(recorded)))
    assert code == 0, out[-3000:]
    facts = json.loads((tmp_path / "out.json").read_text())
    assert gate.facts_from_output("x", output).system.machine
    assert facts["system"]["machine"] == gate.facts_from_output("x", output).system.machine


def test_a_lock_left_by_an_ended_play_of_this_controller_is_taken(tmp_path: Path) -> None:
    """Over SSH a failed play's holder lives on with the connection the next play reuses: the
    next play of this controller releases it (the holder here watches nothing, as that one)."""
    import getpass
    import importlib.util
    import socket

    spec = importlib.util.spec_from_file_location(
        "gpuprov_lock_action", ROOT / "ansible/collection/plugins/action/gpuprov_lock.py"
    )
    assert spec is not None and spec.loader is not None
    action = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(action)
    lock = tmp_path / "run" / "apply.flock"
    # pid 4194303 (the kernel's highest): no process of this machine
    ended = f"ansible-playbook {getpass.getuser()}@{socket.gethostname()} pid 4194303 since x 1"
    hold = action.HOLD.replace('"$5"', "0")  # watch nothing: only a release ends it
    taken = subprocess.run(
        action.command(action.TAKE, str(lock), ended, "5", "120", hold),
        shell=True,
        capture_output=True,
        text=True,
        check=False,
    )
    assert taken.returncode == 0 and held(lock)
    code, out = run(tmp_path, lock_tasks(lock, tmp_path, 5, 0))
    assert code == 0, out[-3000:]
    assert json.loads((tmp_path / "owner.json").read_text()) != ended
    assert released(lock)
