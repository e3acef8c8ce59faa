"""On-demand servers on a host that cannot run them: no systemd-socket-proxyd, or a systemd older
than 246 (its --exit-idle-time=, systemd's NEWS "CHANGES WITH 246"). Both engines refuse the host
before anything is written, in the same words, once; resident servers are unaffected. Also: the
service steps both pyinfra roles share (units.serve), and the ports the Ansible collection checks
across the llama_server and vllm roles (gpuprov_check reads the stack as gpuprov does).

pyinfra: the roles plan against this machine (@local, systemd's operations recorded), the host's
systemd version and systemd-socket-proxyd stood in for. Ansible: the roles' own check tasks under
ansible-playbook on this machine, the facts they read given as variables.
"""

from __future__ import annotations

import contextlib
import importlib.util
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
from pyinfra.api.state import State

from checks.facts.model import HostFacts
from provision import stack, units
from provision.gate import HostGate
from provision.hostplan import HostPlan
from tests.support import ansible_play
from tests.test_ansible_gate import RTX5090, env, run
from tests.test_llama_server_role import operation_names as names

ROOT = Path(__file__).resolve().parent.parent
PLAYBOOK = ROOT / ".venv" / "bin" / "ansible-playbook"
PROXYD = units.PROXYD_PATHS[0]
MODEL = "/srv/models/m.gguf"
RESIDENT = {"name": "main", "model": MODEL, "port": 8080}
CHAT = {"name": "chat", "model": MODEL, "port": 8081, "residency": "on_demand"}
CODER = {"name": "coder", "model": MODEL, "port": 8082, "swap_group": "big"}
REPLICA = {"name": "qwen", "model": "Qwen/Qwen3-8B", "port": 8500, "gpus": [0]}
LAZY = {**REPLICA, "name": "lazy", "port": 8501, "residency": "on_demand"}
OLD = "@local: on-demand servers need systemd >= 246, where systemd-socket-proxyd has"
NONE = "@local: on-demand servers need systemd-socket-proxyd, and this host has none at"


def test_the_words_of_each_refusal() -> None:
    old = units.on_demand_problem("gpu1", "llama_server_profiles", ["chat", "coder"], 245, PROXYD)
    assert old == (
        "gpu1: on-demand servers need systemd >= 246, where systemd-socket-proxyd has"
        " --exit-idle-time=; this host has systemd 245. Upgrade systemd, or make"
        " llama_server_profiles (chat, coder) resident (residency: resident, no swap_group)"
    )
    missing = units.on_demand_problem("gpu1", "vllm_replicas", ["lazy"], 252, "")
    assert missing == (
        "gpu1: on-demand servers need systemd-socket-proxyd, and this host has none at"
        " /usr/lib/systemd/systemd-socket-proxyd or /lib/systemd/systemd-socket-proxyd."
        " Install it (Debian and Ubuntu ship it in the systemd package; some minimal images"
        " leave it out), or make vllm_replicas (lazy) resident (residency: resident,"
        " no swap_group)"
    )
    # an old systemd is named first: upgrading it may bring the proxy too
    assert units.on_demand_problem("h", "f", ["a"], 219, "").startswith(
        "h: on-demand servers need systemd >= 246"
    )


@pytest.mark.parametrize(
    ("version", "proxyd"),
    [(246, PROXYD), (252, units.PROXYD_PATHS[1]), (0, PROXYD)],
    ids=["246", "split-usr", "version-unknown"],
)
def test_a_host_that_can_run_them_is_not_refused(version: int, proxyd: str) -> None:
    assert units.on_demand_problem("gpu1", "llama_server_profiles", ["chat"], version, proxyd) == ""


# --- pyinfra ---------------------------------------------------------------------------------


def _load(name: str) -> ModuleType:
    module_name = f"gpuprov_roles.{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(
        module_name, ROOT / f"roles/{name}/tasks/{name}.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def local(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[State, list[dict[str, Any]]]]:
    """@local, systemd's operations recorded (no systemd runs here)."""
    calls: list[dict[str, Any]] = []
    record = lambda **kwargs: calls.append(kwargs)  # noqa: E731
    monkeypatch.setattr(units, "systemd", SimpleNamespace(service=record, daemon_reload=record))
    state = State(Inventory((["@local"], {})), Config())  # type: ignore[no-untyped-call]
    connect_all(state)
    yield state, calls
    disconnect_all(state)


def host_as(monkeypatch: pytest.MonkeyPatch, version: int, proxyd: str) -> None:
    """The host's systemd version and systemd-socket-proxyd, as the roles read them."""
    monkeypatch.setattr(units, "systemd_version", lambda: version)
    monkeypatch.setattr(units, "socket_proxyd", lambda: proxyd)


def plan_of(tmp_path: Path, **data: Any) -> HostPlan:
    data = {"llama_cpp_prefix": str(tmp_path), "vllm_engine": "/usr/bin/docker", **data}
    verdict = HostGate("@local", HostFacts())
    verdict.image, verdict.image_present = "vllm/vllm-openai:v0.21.0", True
    return HostPlan("@local", stack.from_data(data), stack.variables(data), verdict)


@pytest.mark.parametrize(
    ("role", "data", "version", "proxyd", "said"),
    [
        ("llama_server", {"llama_server_profiles": [RESIDENT, CHAT]}, 245, PROXYD, OLD),
        ("llama_server", {"llama_server_profiles": [CODER]}, 252, "", NONE),
        ("vllm", {"vllm_replicas": [REPLICA, LAZY]}, 239, PROXYD, OLD),
        ("vllm", {"vllm_replicas": [LAZY]}, 255, "", NONE),
    ],
    ids=["llama-old-systemd", "llama-no-proxyd", "vllm-old-systemd", "vllm-no-proxyd"],
)
def test_pyinfra_refuses_the_host_before_anything_is_written(
    local: tuple[State, list[dict[str, Any]]],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    role: str,
    data: dict[str, Any],
    version: int,
    proxyd: str,
    said: str,
) -> None:
    state, calls = local
    host_as(monkeypatch, version, proxyd)
    entry = getattr(_load(role), role)
    args = (None,) if role == "llama_server" else ()
    with pytest.raises(PyinfraError, match="No hosts remaining"):  # @local was the only host
        add_deploy(state, entry, plan_of(tmp_path, **data), *args)
    assert [h.name for h in state.failed_hosts] == ["@local"]
    assert not state.get_op_order() and not calls  # no operation, no systemd call
    assert caplog.text.count(said) == 1


def test_said_once_when_both_roles_have_on_demand_servers(
    local: tuple[State, list[dict[str, Any]]],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The second role finds the host failed and says nothing (with other hosts left, pyinfra
    goes on planning this one's later roles; here @local is alone, so that error is kept out)."""
    state, _ = local
    host_as(monkeypatch, 245, PROXYD)
    found: list[str | None] = []

    @deploy("both roles")
    def both() -> None:
        with contextlib.suppress(PyinfraError):
            found.append(units.on_demand_proxyd("llama_server_profiles", ["chat"]))
        found.append(units.on_demand_proxyd("vllm_replicas", ["lazy"]))

    with contextlib.suppress(PyinfraError):
        add_deploy(state, both)
    # the first refusal failed @local, the last host (its error kept out above): only the
    # second call returned, with None and without a word
    assert found == [None]
    assert caplog.text.count("on-demand servers need systemd >= 246") == 1


@pytest.mark.parametrize(
    ("role", "data"),
    [
        ("llama_server", {"llama_server_profiles": [RESIDENT]}),
        ("vllm", {"vllm_replicas": [REPLICA]}),
    ],
)
def test_resident_servers_are_unaffected(
    local: tuple[State, list[dict[str, Any]]],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    role: str,
    data: dict[str, Any],
) -> None:
    """Neither the systemd version nor the proxy matters to a resident server."""
    state, _ = local
    host_as(monkeypatch, 219, "")
    args = (None,) if role == "llama_server" else ()
    add_deploy(state, getattr(_load(role), role), plan_of(tmp_path, **data), *args)
    assert not state.failed_hosts
    assert any(n.startswith("Unit gpuprov-") for n in names(state))


def test_the_llama_server_role_serves_through_the_shared_steps(
    local: tuple[State, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """units.serve: the readiness wait, each EnvironmentFile and unit, an on-demand profile's
    proxy and socket, then converge (the socket runs; the server waits for a connection)."""
    state, calls = local
    host_as(monkeypatch, 252, PROXYD)
    add_deploy(
        state,
        _load("llama_server").llama_server,
        plan_of(tmp_path, llama_server_profiles=[RESIDENT, CHAT]),
        None,
    )
    planned = [n for n in names(state) if n.startswith(("Unit ", "Install the readiness"))]
    assert planned == [
        "Install the readiness wait of on-demand servers",
        "Unit gpuprov-llama-main.service",
        "Unit gpuprov-llama-chat.service",
        "Unit gpuprov-llama-chat-proxy.service",
        "Unit gpuprov-llama-chat.socket",
    ]
    running = {c["service"] for c in calls if c.get("running")}
    assert running == {"gpuprov-llama-main.service", "gpuprov-llama-chat.socket"}


# --- Ansible ---------------------------------------------------------------------------------

needs_ansible = pytest.mark.skipif(not PLAYBOOK.is_file(), reason="no ansible-playbook")


def check_task(role: str) -> dict[str, Any]:
    tasks = yaml.safe_load((ROOT / "roles" / role / "tasks" / "main.yml").read_text())
    found = [t for t in tasks if t["name"].startswith("Check that this host can run the on-demand")]
    assert len(found) == 1
    return found[0]


def before_any_write(role: str) -> None:
    """The check comes before the role's first task that changes the host."""
    tasks = yaml.safe_load((ROOT / "roles" / role / "tasks" / "main.yml").read_text())
    index = tasks.index(check_task(role))
    writes = (
        "ansible.builtin.user",
        "ansible.builtin.file",
        "ansible.builtin.copy",
        "ansible.builtin.template",
        "ansible.builtin.systemd_service",
    )
    first = next(i for i, t in enumerate(tasks) if any(k in t for k in writes))
    assert index < first


def ansible_facts(role: str, systemctl: str, proxyd: str, on_demand: list[str]) -> dict[str, Any]:
    """What the role's check reads, as its earlier tasks leave it."""
    servers = [{"name": n} for n in on_demand]
    if role == "llama_server":
        version = int(systemctl.split()[1])
        return {
            "llama_server_systemd_version": version,
            "llama_server_socket_proxyd": proxyd,
            "llama_server_on_demand": servers,
        }
    return {
        "vllm_systemctl": {"stdout_lines": [systemctl, "+PAM +AUDIT"]},
        "vllm_socket_proxyd": proxyd,
        "vllm_on_demand": servers,
    }


@needs_ansible
@pytest.mark.parametrize(
    ("role", "field", "systemctl", "proxyd"),
    [
        ("llama_server", "llama_server_profiles", "systemd 245 (245.4-4ubuntu3.24)", PROXYD),
        ("llama_server", "llama_server_profiles", "systemd 252 (252.38-1~deb12u1)", ""),
        ("vllm", "vllm_replicas", "systemd 239 (239-78.el8)", PROXYD),
        ("vllm", "vllm_replicas", "systemd 255 (255.4-1ubuntu8)", ""),
    ],
)
def test_ansible_refuses_in_the_same_words(
    tmp_path: Path, role: str, field: str, systemctl: str, proxyd: str
) -> None:
    before_any_write(role)
    variables = ansible_facts(role, systemctl, proxyd, ["chat", "coder"])
    done = ansible_play.run_local(tmp_path, [check_task(role)], variables)
    assert done.returncode != 0
    version = int(systemctl.split()[1])
    expected = units.on_demand_problem("localhost", field, ["chat", "coder"], version, proxyd)
    assert expected and expected in done.stdout, done.stdout[-3000:]


@needs_ansible
@pytest.mark.parametrize("role", ["llama_server", "vllm"])
@pytest.mark.parametrize(
    ("systemctl", "proxyd", "on_demand"),
    [("systemd 246 (246)", PROXYD, ["chat"]), ("systemd 219 (219-78.el7)", "", [])],
    ids=["can-run-them", "resident-only"],
)
def test_ansible_lets_a_host_that_can_run_them_through(
    tmp_path: Path, role: str, systemctl: str, proxyd: str, on_demand: list[str]
) -> None:
    variables = ansible_facts(role, systemctl, proxyd, on_demand)
    done = ansible_play.run_local(tmp_path, [check_task(role)], variables)
    assert done.returncode == 0, done.stdout[-3000:]


# --- ports across the two roles under Ansible ------------------------------------------------


@needs_ansible
@pytest.mark.parametrize(
    ("profile", "replica", "said"),
    [
        (
            RESIDENT,
            {**REPLICA, "port": 8080},
            "port 8080 is already used by llama_server_profiles (main)",
        ),
        (CHAT, {**REPLICA, "port": 18081}, "port 18081 is already used by"),  # chat's backend port
    ],
    ids=["public-port", "backend-port"],
)
def test_gpuprov_check_refuses_a_port_both_roles_claim(
    tmp_path: Path, profile: dict[str, Any], replica: dict[str, Any], said: str
) -> None:
    """gpuprov_check (the first task of both roles) reads the play's llama_server_profiles and
    vllm_replicas into gpuprov's stack, which gives every server its own port."""
    variables = {"llama_server_profiles": [profile], "vllm_replicas": [replica]}
    with pytest.raises(Exception, match=said.replace("(", r"\(").replace(")", r"\)")):
        stack.from_data(variables)
    code, out = run(
        tmp_path,
        [{"gpuprov_check": {}}],
        variables={**variables, "gpuprov_check_skip": True},
        environ=env(GPUPROV_CHECK_PROBE_OUTPUT=str(RTX5090)),
    )
    assert code != 0
    assert "gpuprov_check: " in out and said in out, out[-3000:]
