"""The llama_server role's check of the profiles' arguments against the llama-server just built.

pyinfra: the role plans against this machine (@local, systemd operations recorded, nothing else
executed) to show where the check goes; the check itself runs here for real as a python.call
operation, reading a stand-in `llama-server` that prints recorded --help and --version output
(tests/fixtures/llama_server/) from a real build layout. Ansible: the role's own check tasks run
under ansible-playbook on this machine against the same stand-in.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
import yaml
from pyinfra.api.config import Config
from pyinfra.api.connect import connect_all, disconnect_all
from pyinfra.api.deploy import add_deploy, deploy
from pyinfra.api.exceptions import PyinfraError
from pyinfra.api.inventory import Inventory
from pyinfra.api.operations import run_ops
from pyinfra.api.state import State
from pyinfra.operations import python

from checks.facts.model import HostFacts, from_dict
from provision import gate, stack, units
from provision.hostplan import HostPlan
from tests.conftest import FIXTURES
from tests.support import ansible_play

ROOT = Path(__file__).resolve().parent.parent
ROLE = ROOT / "roles" / "llama_server"
RECORDED = FIXTURES / "llama_server"
NEW_HELP = "help_llama-cpp-python-0.3.36.txt"
CHECK = "Check the profiles' arguments against the new llama-server"
MAIN = {"name": "main", "model": "/srv/models/m.gguf", "port": 8080}


@pytest.fixture(scope="module")
def role() -> ModuleType:
    name = "gpuprov_roles.llama_server"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROLE / "tasks" / "llama_server.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def local(monkeypatch: pytest.MonkeyPatch) -> Iterator[State]:
    """@local, with systemd's operations recorded: no systemd runs here."""
    record = lambda **kwargs: None  # noqa: E731
    monkeypatch.setattr(units, "systemd", SimpleNamespace(service=record, daemon_reload=record))
    state = State(Inventory((["@local"], {})), Config())  # type: ignore[no-untyped-call]
    connect_all(state)
    yield state
    disconnect_all(state)


def built(prefix: Path, name: str, help_name: str = NEW_HELP) -> None:
    """A finished build `name` under `prefix`, `current` pointing at it, whose llama-server
    prints recorded output."""
    folder = prefix / "builds" / name
    (folder / "bin").mkdir(parents=True)
    script = folder / "bin" / "llama-server"
    version = RECORDED / "version_b10991_llama-cpp-28971.txt"
    script.write_text(
        f'#!/bin/sh\ncase "$1" in --version) cat {version} >&2 ;;'
        f" --help) cat {RECORDED / help_name} ;; *) exit 1 ;; esac\n"
    )
    script.chmod(0o755)
    (folder / ".complete").touch()
    (prefix / "current").unlink(missing_ok=True)
    (prefix / "current").symlink_to(f"builds/{name}")


def host_plan(prefix: Path, *profiles: dict[str, Any], force: bool = False) -> HostPlan:
    data = {"llama_cpp_prefix": str(prefix), "llama_server_profiles": list(profiles)}
    cpu = json.loads((FIXTURES / "rules" / "GPU-001" / "fail.json").read_text())["facts"]
    host_stack = stack.from_data(data)
    verdict = gate.judge("@local", from_dict(HostFacts, cpu), host_stack)
    assert verdict.plan is not None
    return HostPlan("@local", host_stack, stack.variables(data), verdict, force=force)


def operation_names(state: State) -> list[str]:
    host = state.inventory.get_host("@local")
    return [
        sorted(state.get_op_meta(op_hash).names)[0].rsplit(" | ", 1)[-1]
        for op_hash in state.get_op_order()
        if state.ops[host].get(op_hash) is not None
    ]


@pytest.mark.parametrize(
    ("was_built", "force", "checked"),
    [(True, False, True), (True, True, False), (False, False, False)],
    ids=["after-a-build", "force", "no-build"],
)
def test_the_check_comes_first_after_a_build(
    local: State, role: ModuleType, tmp_path: Path, was_built: bool, force: bool, checked: bool
) -> None:
    """Without a build the gate read the planned build itself; --force overrides the gate."""
    plan = host_plan(tmp_path, MAIN, force=force)
    add_deploy(local, role.llama_server, plan, object() if was_built else None)
    names = operation_names(local)
    assert (CHECK in names) is checked
    if checked:
        assert names[0] == CHECK
        assert any(n.startswith("Unit gpuprov-llama-main") for n in names)


def checked(local: State, role: ModuleType, plan: HostPlan) -> None:
    @deploy("check only")
    def check_only() -> None:
        python.call(name=CHECK, function=role.check_arguments, plan=plan)

    add_deploy(local, check_only)
    run_ops(local)


def test_a_refused_argument_fails_the_host(
    local: State, role: ModuleType, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plan = host_plan(tmp_path, {**MAIN, "extra_args": ["--mlock"]})
    assert plan.gate.plan is not None
    built(tmp_path, plan.gate.plan.name)
    with pytest.raises(PyinfraError, match="No hosts remaining"):
        checked(local, role, plan)
    assert [h.name for h in local.failed_hosts] == ["@local"]
    assert "profile main: llama-server b10991 (930e2fa59) does not accept --mlock" in caplog.text


def test_accepted_arguments_pass(local: State, role: ModuleType, tmp_path: Path) -> None:
    plan = host_plan(tmp_path, {**MAIN, "mlock": True, "extra_args": ["-lm", "mmap+mlock"]})
    assert plan.gate.plan is not None
    built(tmp_path, plan.gate.plan.name)
    checked(local, role, plan)
    assert not local.failed_hosts


def test_a_help_without_options_is_not_a_failure(
    local: State, role: ModuleType, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plan = host_plan(tmp_path, {**MAIN, "extra_args": ["--mlock"]})
    assert plan.gate.plan is not None
    built(tmp_path, plan.gate.plan.name, help_name="version_b10991_llama-cpp-28971.txt")
    checked(local, role, plan)
    assert not local.failed_hosts
    assert "listed no options for --help: arguments not checked" in caplog.text


# --- Ansible --------------------------------------------------------------------------------


def check_tasks() -> list[dict[str, Any]]:
    """The role's own tasks: the profiles merged with their defaults, then the check."""
    tasks = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    merged = tasks[0]
    assert "llama_server_resolved_profiles" in merged["ansible.builtin.set_fact"]
    return [merged, *(t for t in tasks if "llama_server_check" in t.get("tags", ()))]


@pytest.mark.skipif(
    not (ROOT / ".venv" / "bin" / "ansible-playbook").is_file(), reason="no ansible-playbook"
)
@pytest.mark.parametrize(
    ("extra", "refused"),
    [(["--mlock"], "does not accept --mlock"), (["-lm", "mmap+mlock", "--jinja"], None)],
)
def test_ansible_checks_the_same(tmp_path: Path, extra: list[str], refused: str | None) -> None:
    prefix = tmp_path / "llama.cpp"
    built(prefix, "b10991-0123456789ab")
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    variables = {
        "llama_cpp_prefix": str(prefix),
        "llama_cpp_build_name": "b10991-0123456789ab",
        "llama_server_defaults": defaults["llama_server_defaults"],
        "llama_server_profiles": [{**MAIN, "extra_args": extra}],
    }
    tasks = check_tasks()
    assert len(tasks) == 3
    done = ansible_play.run_local(tmp_path, tasks, variables)
    if refused is None:
        assert done.returncode == 0, done.stdout + done.stderr
    else:
        assert done.returncode != 0
        assert f"profile main: llama-server b10991 (930e2fa59) {refused}" in done.stdout
