"""On-demand vLLM replicas and swap groups: the settings (read as llama.cpp profiles' are), the
container published on its loopback backend port, the three units each gets (the replica, and
llama_server's socket and proxy templates), Ansible rendering the same bytes from the same
resolved settings, the VRAM budget of a vLLM swap group, the canary's targets, status and the
post-apply check's targets, and the readiness wait against a port that accepts and closes.
systemd running them is tested in tests/e2e/test_vllm_on_demand.py."""

from __future__ import annotations

import dataclasses
import http.server
import importlib.util
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
import yaml
from pyinfra.api.config import Config
from pyinfra.api.connect import connect_all, disconnect_all
from pyinfra.api.deploy import add_deploy
from pyinfra.api.inventory import Inventory
from pyinfra.api.state import State

from checks.facts.model import Gpu, HostFacts
from provision import (
    gate,
    servicefacts,
    stack,
    status,
    status_cli,
    templates,
    units,
    verify,
    vllm,
    vram,
)
from provision.gate import HostGate
from provision.hostplan import HostPlan
from provision.settings.read import StackError
from tests.support import ansible_play
from tests.test_quoting import needs_verify
from tests.test_quoting import verify as systemd_verify

ROOT = Path(__file__).resolve().parent.parent
IMAGE = "vllm/vllm-openai:v0.21.0"
PROXYD = "/usr/lib/systemd/systemd-socket-proxyd"
WAIT = ROOT / "roles" / "llama_server" / "files" / "gpuprov-wait-ready.py"
RESIDENT = {"name": "main", "model": "Qwen/Qwen3-8B", "port": 8500, "gpus": [0]}
DEMAND = {**RESIDENT, "name": "chat", "port": 8501, "residency": "on_demand", "idle_seconds": 900}
A = {**RESIDENT, "name": "coder", "port": 8502, "swap_group": "big"}
B = {**RESIDENT, "name": "writer", "port": 8503, "swap_group": "big", "backend_port": 9503}


def _data(*replicas: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"vllm_engine": "/usr/bin/docker", "vllm_replicas": list(replicas), **more}


def _replicas(*replicas: dict[str, Any], **more: Any) -> tuple[vllm.Replica, ...]:
    return stack.from_data(_data(*replicas, **more)).vllm.replicas


def _unit(data: dict[str, Any], index: int, systemd_version: int = 252) -> str:
    """A replica's unit as the role renders it (its swap peers included)."""
    found = stack.from_data(data).vllm.replicas
    r = found[index]
    return templates.render(
        "vllm",
        "vllm.service.j2",
        replica=dataclasses.asdict(r),
        image=IMAGE,
        nvidia_persistenced=False,
        systemd_version=systemd_version,
        vllm_swap_peers=[q.name for q in found if r.swap_group == q.swap_group != "" and q != r],
        **stack.variables(data),
    )


def _socket_variables(data: dict[str, Any], index: int) -> dict[str, Any]:
    r = stack.from_data(data).vllm.replicas[index]
    return units.on_demand_variables(r.unit, "vLLM replica", dataclasses.asdict(r), PROXYD)


def _socket_units(data: dict[str, Any], index: int) -> tuple[str, str]:
    variables = _socket_variables(data, index)
    return (
        templates.render("llama_server", "llama-server.socket.j2", **variables),
        templates.render("llama_server", "llama-server-proxy.service.j2", **variables),
    )


def test_residency_defaults_and_backend_ports() -> None:
    resident, demand, a, b = _replicas(RESIDENT, DEMAND, A, B)
    assert (resident.residency, resident.backend_port, resident.on_demand) == ("resident", 0, False)
    assert (demand.residency, demand.backend_port, demand.idle_seconds) == ("on_demand", 18501, 900)
    assert a.on_demand and a.swap_group == "big" and a.backend_port == 18502
    assert b.backend_port == 9503
    assert (demand.socket_unit, demand.proxy_unit) == (
        "gpuprov-vllm-chat.socket",
        "gpuprov-vllm-chat-proxy.service",
    )


@pytest.mark.parametrize(
    ("replicas", "where", "why"),
    [
        ([{**DEMAND, "residency": "sometimes"}], "[0].residency", "one of resident, on_demand"),
        ([{**DEMAND, "idle_seconds": 0}], "[0].idle_seconds", ""),
        ([{**DEMAND, "port": 60000}], "[0].backend_port", "past 65535"),
        ([DEMAND, {**RESIDENT, "port": 18501}], "[0].backend_port", "another replica's port"),
        ([A, {**B, "backend_port": 18502}], "[1].backend_port", "another replica's port"),
        ([{**DEMAND, "swap_group": "Big Group"}], "[0].swap_group", ""),
        ([DEMAND, {**RESIDENT, "name": "chat-proxy"}], "[1].name", "proxy unit"),
    ],
)
def test_bad_residency_settings_name_the_field(
    replicas: list[dict[str, Any]], where: str, why: str
) -> None:
    with pytest.raises(StackError) as found:
        _replicas(*replicas)
    assert f"vllm_replicas{where}" in str(found.value) and why in str(found.value)


def test_a_backend_port_may_not_be_the_other_engines_port() -> None:
    """An on-demand replica's backend (port + 10000) is a llama.cpp profile's port: refused,
    whichever engine's server came first."""
    profile = {"name": "m", "model": "/m.gguf", "port": 18501}
    with pytest.raises(StackError) as found:
        stack.from_data({"vllm_replicas": [DEMAND], "llama_server_profiles": [profile]})
    assert "vllm_replicas (chat).backend_port" in str(found.value)
    assert "port 18501 is already used by llama_server_profiles (m)" in str(found.value)
    lazy = {**profile, "port": 8080, "residency": "on_demand", "backend_port": 8500}
    with pytest.raises(StackError) as found:
        stack.from_data({"vllm_replicas": [RESIDENT], "llama_server_profiles": [lazy]})
    assert "llama_server_profiles (m).backend_port" in str(found.value)


def test_an_on_demand_container_is_published_on_its_loopback_backend() -> None:
    s = stack.from_data(_data(RESIDENT, {**DEMAND, "host": "0.0.0.0"}))
    resident, demand = (vllm.run_args(r, s.vllm, IMAGE) for r in s.vllm.replicas)
    assert resident[resident.index("-p") + 1] == "127.0.0.1:8500:8000"
    assert demand[demand.index("-p") + 1] == "127.0.0.1:18501:8000"
    # Ansible's merged dict reaches the same argv through the filter
    assert (
        vllm.command_filter(
            dataclasses.asdict(s.vllm.replicas[1]),
            IMAGE,
            "/usr/bin/docker",
            "index",
            s.vllm.model_cache,
        )
        == demand
    )


def test_an_on_demand_replica_waits_behind_its_socket() -> None:
    unit = _unit(_data(DEMAND), 0)
    lines = unit.splitlines()
    assert "StopWhenUnneeded=yes" in lines and "Restart=on-failure" in lines
    # every wake and swap is a start: systemd 252's start limit would refuse the sixth
    assert "StartLimitIntervalSec=0" in lines and not any(
        line.startswith("StartLimitBurst") for line in lines
    )
    assert "[Install]" not in unit  # never started at boot: the socket starts it
    assert (
        'ExecStartPost="/usr/local/lib/gpuprov/gpuprov-wait-ready.py" '
        '"http://127.0.0.1:18501/health" 900'
    ) in lines
    assert "TimeoutStartSec=910" in lines  # vllm_startup_seconds + 10
    assert 'ExecStop=/usr/bin/docker stop -t 30 "gpuprov-vllm-chat"' in lines
    sock, proxy = _socket_units(_data(DEMAND), 0)
    assert "ListenStream=127.0.0.1:8501" in sock.splitlines()
    assert "Service=gpuprov-vllm-chat-proxy.service" in sock.splitlines()
    assert "Description=vLLM replica chat: port 8501, started on the first connection" in sock
    assert f'ExecStart="{PROXYD}" --exit-idle-time=900s 127.0.0.1:18501' in proxy.splitlines()
    assert "Requires=gpuprov-vllm-chat.service gpuprov-vllm-chat.socket" in proxy.splitlines()
    assert "After=gpuprov-vllm-chat.service gpuprov-vllm-chat.socket" in proxy.splitlines()


def test_a_resident_replica_keeps_its_unit() -> None:
    unit = _unit(_data(RESIDENT, DEMAND), 0)
    assert "StopWhenUnneeded" not in unit and "ExecStartPost" not in unit
    assert "Restart=always" in unit.splitlines()
    assert unit.endswith("\n[Install]\nWantedBy=multi-user.target\n")


def test_swap_group_members_conflict_with_each_other_in_order() -> None:
    third = {**A, "name": "third", "port": 8504}
    data = _data(DEMAND, A, B, third)
    coder, writer = _unit(data, 1).splitlines(), _unit(data, 2).splitlines()
    assert "Conflicts=gpuprov-vllm-writer.service" in coder
    assert "Conflicts=gpuprov-vllm-third.service" in coder
    assert not any("chat" in line for line in coder if line.startswith("Conflicts"))
    # one ordering per pair: writer after coder, never both ways
    assert "After=gpuprov-vllm-coder.service" in writer
    assert "After=gpuprov-vllm-writer.service" not in coder
    assert not any(line.startswith("Conflicts") for line in _unit(data, 0).splitlines())


def test_an_ipv6_wildcard_socket() -> None:
    sock, _ = _socket_units(_data({**DEMAND, "host": "::"}), 0)
    assert "ListenStream=[::]:8501" in sock.splitlines()


@needs_verify
def test_systemd_verifies_the_three_units(tmp_path: Path) -> None:
    if not Path(PROXYD).is_file():
        pytest.skip("no systemd-socket-proxyd here")
    engine = tmp_path / "docker"
    wait = tmp_path / "wait-ready.py"
    for path in (engine, wait):
        path.write_text("#!/bin/sh\nexit 0\n")
        path.chmod(0o755)
    data = _data(DEMAND, A, B, vllm_engine=str(engine), vllm_wait_ready=str(wait))
    paths = []
    for index, r in enumerate(stack.from_data(data).vllm.replicas):
        sock, proxy = _socket_units(data, index)
        for name, text in (
            (r.unit, _unit(data, index)),
            (r.socket_unit, sock),
            (r.proxy_unit, proxy),
        ):
            (tmp_path / name).write_text(text)
            paths.append(tmp_path / name)
    done = systemd_verify(*paths)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == ""


def _ansible_resolved(tmp_path: Path, replicas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """vllm_resolved_replicas as the role's first task computes them under ansible-playbook."""
    tasks = yaml.safe_load((ROOT / "roles/vllm/tasks/main.yml").read_text())
    defaults = yaml.safe_load((ROOT / "roles/vllm/defaults/main.yml").read_text())
    out = tmp_path / "resolved.json"
    write = {
        "ansible.builtin.copy": {
            "content": "{{ vllm_resolved_replicas | to_json }}",
            "dest": str(out),
        }
    }
    done = ansible_play.run_local(
        tmp_path, [tasks[0], write], {**defaults, "vllm_replicas": replicas}
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found: list[dict[str, Any]] = json.loads(out.read_text())
    return found


def test_ansible_resolves_the_replicas_as_gpuprov_does(tmp_path: Path) -> None:
    replicas = [RESIDENT, DEMAND, A, B]
    resolved = _ansible_resolved(tmp_path, replicas)
    for mine, theirs in zip(_replicas(*replicas), resolved, strict=True):
        for key in ("residency", "idle_seconds", "swap_group", "backend_port"):
            assert theirs[key] == getattr(mine, key), (mine.name, key)


def test_ansible_renders_the_same_bytes(tmp_path: Path) -> None:
    """The role's templates (the replica's own, llama_server's socket and proxy) from the
    resolved replica, with the variables roles/vllm/tasks/main.yml passes."""
    data = _data(A, B)
    (tmp_path / "resolve").mkdir()
    resolved = _ansible_resolved(tmp_path / "resolve", [A, B])
    variables = {
        **stack.variables(data),
        "replica": resolved[1],
        "image": IMAGE,
        "nvidia_persistenced": False,
        "systemd_version": 252,
        "vllm_swap_peers": ["coder"],
        "service": resolved[1],
        "service_unit": "gpuprov-vllm-writer",
        "service_what": "vLLM replica",
        "backend": f"127.0.0.1:{resolved[1]['backend_port']}",
        "socket_proxyd": PROXYD,
    }
    sock, proxy = _socket_units(data, 1)
    expected = {"unit": _unit(data, 1), "socket": sock, "proxy": proxy}
    sources = {
        "unit": "vllm/templates/vllm.service.j2",
        "socket": "llama_server/templates/llama-server.socket.j2",
        "proxy": "llama_server/templates/llama-server-proxy.service.j2",
    }
    written = ansible_play.render(tmp_path, sources, variables)
    for name, text in expected.items():
        assert written[name] == text.encode(), name


def test_the_role_reaches_llama_servers_templates_and_script() -> None:
    """The paths roles/vllm/tasks/main.yml names relative to role_path exist in roles/ (the
    collection copies every role beside the others: tests/test_ansible_collection.py)."""
    role = ROOT / "roles" / "vllm"
    text = (role / "tasks" / "main.yml").read_text()
    named = [
        line.split("{{ role_path }}/", 1)[1].rstrip('"')
        for line in text.splitlines()
        if "{{ role_path }}/" in line
    ]
    assert len(named) == 3
    for relative in named:
        assert (role / relative).resolve().is_file(), relative


def test_a_vllm_swap_group_counts_its_largest_member_once() -> None:
    gpus = [Gpu(index=0, name="RTX 3090", memory_total_mib=24576)]
    claims = [
        vram.VllmClaim("main", (0,), 0.3),
        vram.VllmClaim("coder", (0,), 0.6, group=gate.vllm_group("big")),
        vram.VllmClaim("writer", (0,), 0.5, group=gate.vllm_group("big")),
    ]
    fits = vram.budget(gpus, claims)
    assert fits.fits, fits.problems  # 0.3 + 0.6, where a sum of all would be 1.4
    assert fits.rows[0].used_mib == pytest.approx(0.9 * 24576)
    assert "swap group big (vLLM): one member at a time" in "\n".join(fits.lines())
    # an on-demand replica outside any group may run beside the others: it counts in full
    over = vram.budget(gpus, [*claims, vram.VllmClaim("chat", (0,), 0.2)])
    assert not over.fits
    assert any("vLLM fractions sum to 1.10" in p for p in over.problems)


def test_the_gate_groups_vllm_members_apart_from_llama_groups() -> None:
    s = stack.from_data(_data(A, B))
    facts = HostFacts(gpus=[Gpu(index=0, name="RTX 3090", memory_total_mib=24576)])
    verdict = HostGate("box", facts)
    gate.judge_services(verdict, s, servicefacts.ServiceFacts())
    assert verdict.budget is not None and verdict.budget.fits  # 0.9 once, not 1.8
    groups = {h.service: h.group for h in verdict.budget.rows[0].holders}
    assert groups == {
        "gpuprov-vllm-coder.service": "big (vLLM)",
        "gpuprov-vllm-writer.service": "big (vLLM)",
    }


def _canary(data: dict[str, Any]) -> list[list[str]]:
    s = stack.from_data(data)
    text = templates.render(
        "canary",
        "canary.tsv.j2",
        profiles=[],
        replicas=[dataclasses.asdict(r) for r in s.vllm.replicas],
        **stack.variables(data),
    )
    return [line.split("\t") for line in text.splitlines() if not line.startswith("#")]


def test_the_canary_probes_an_on_demand_replica_on_its_backend() -> None:
    rows = _canary(_data(RESIDENT, {**DEMAND, "host": "0.0.0.0"}))
    assert [r[:2] + r[4:] for r in rows] == [
        ["gpuprov-vllm-main.service", "http://127.0.0.1:8500", "openai", "900", "resident"],
        ["gpuprov-vllm-chat.service", "http://127.0.0.1:18501", "openai", "900", "on_demand"],
    ]


def test_the_canary_probes_the_balancer_only_in_front_of_resident_replicas() -> None:
    second = {**RESIDENT, "name": "main-2", "port": 8510}
    resident = _canary(_data(RESIDENT, second, nginx_lb_enabled=True))
    assert resident[-1][0] == "nginx.service"
    mixed = _canary(_data(RESIDENT, DEMAND, nginx_lb_enabled=True))
    assert [r[0] for r in mixed] == ["gpuprov-vllm-main.service", "gpuprov-vllm-chat.service"]


def test_status_shows_an_idle_on_demand_replica_as_idle() -> None:
    s = stack.from_data(_data(RESIDENT, DEMAND, canary_enabled=False))
    managed = {m.name: m for m in status.managed(s)}
    assert managed["chat"].socket == "gpuprov-vllm-chat.socket" and managed["main"].socket == ""
    found = status.HostState()
    for unit, active, sub in (
        ("gpuprov-vllm-main.service", "active", "running"),
        ("gpuprov-vllm-chat.service", "inactive", "dead"),
        ("gpuprov-vllm-chat.socket", "active", "listening"),
        ("gpuprov-vllm-chat-proxy.service", "inactive", "dead"),
    ):
        found.units[unit] = status.UnitState(unit, "loaded", active, sub)
    host = status_cli.host_status("h", s, None, found, [])
    services = {x.service: x for x in host.services}
    assert services["chat"].state == "idle (on demand)" and services["chat"].drift == []
    assert host.stale == []  # the socket and the proxy are the replica's
    found.units["gpuprov-vllm-chat.socket"].active = "failed"
    again = {x.service: x for x in status_cli.host_status("h", s, None, found, []).services}
    assert "its socket gpuprov-vllm-chat.socket is not listening (failed (listening))" in (
        again["chat"].drift
    )


def test_the_post_apply_check_wakes_an_on_demand_replica_through_its_socket() -> None:
    data = _data(RESIDENT, {**DEMAND, "host": "0.0.0.0"})
    s = stack.from_data(data)
    plan = HostPlan("h", s, stack.variables(data), HostGate("h", HostFacts()))
    found = {t.unit: t for t in verify.targets(plan)}
    assert found["gpuprov-vllm-chat.socket"].url == "http://127.0.0.1:8501"
    assert found["gpuprov-vllm-chat.socket"].kind == "openai"
    assert found["gpuprov-vllm-main.service"].url == "http://127.0.0.1:8500"
    assert "gpuprov-vllm-chat.service" not in found


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def closing_then_ready() -> Iterator[int]:
    """A port that, as docker's published port before vLLM listens, accepts connections and
    closes them without a reply (the first 5), then answers /health with 200."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.1)  # so the thread sees `stop` and ends with the test
    port = listener.getsockname()[1]
    stop = threading.Event()

    def serve() -> None:
        closed = 0
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(5)
            if closed < 5:
                closed += 1
            else:
                _Health(conn, ("127.0.0.1", 0), None)  # type: ignore[arg-type]
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield port
    stop.set()
    thread.join(timeout=5)
    listener.close()


def test_the_readiness_wait_outlasts_a_port_that_closes_without_a_reply(
    closing_then_ready: int,
) -> None:
    url = f"http://127.0.0.1:{closing_then_ready}/health"
    done = subprocess.run(
        [sys.executable, str(WAIT), url, "20"], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr


def test_the_readiness_wait_gives_up_on_a_refused_port() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    url = f"http://127.0.0.1:{port}/health"
    done = subprocess.run(
        [sys.executable, str(WAIT), url, "0.5"], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 1
    assert "did not answer 200 within 0.5s" in done.stderr


@pytest.fixture
def vllm_role(
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[ModuleType, State, list[dict[str, Any]]]]:
    """The vllm role's pyinfra tasks planned @local, systemd's operations recorded."""
    calls: list[dict[str, Any]] = []
    record = lambda **kwargs: calls.append(kwargs)  # noqa: E731
    monkeypatch.setattr(units, "systemd", SimpleNamespace(service=record, daemon_reload=record))
    # a host that can run on-demand units, whatever systemd this machine has
    monkeypatch.setattr(units, "systemd_version", lambda: 252)
    monkeypatch.setattr(units, "socket_proxyd", lambda: "/usr/lib/systemd/systemd-socket-proxyd")
    name = "gpuprov_roles.vllm"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, ROOT / "roles/vllm/tasks/vllm.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    state = State(Inventory((["@local"], {})), Config())  # type: ignore[no-untyped-call]
    connect_all(state)
    yield module, state, calls
    disconnect_all(state)


def test_the_role_writes_the_three_units_and_starts_only_the_resident(
    vllm_role: tuple[ModuleType, State, list[dict[str, Any]]],
) -> None:
    module, state, calls = vllm_role
    data = _data(RESIDENT, DEMAND)
    verdict = HostGate("@local", HostFacts())
    verdict.image, verdict.image_present = IMAGE, True
    plan = HostPlan("@local", stack.from_data(data), stack.variables(data), verdict)
    add_deploy(state, module.vllm, plan)
    host = state.inventory.get_host("@local")
    names = [
        sorted(state.get_op_meta(op).names)[0].rsplit(" | ", 1)[-1]
        for op in state.get_op_order()
        if state.ops[host].get(op) is not None
    ]
    for unit in (
        "gpuprov-vllm-main.service",
        "gpuprov-vllm-chat.service",
        "gpuprov-vllm-chat-proxy.service",
        "gpuprov-vllm-chat.socket",
    ):
        assert f"Unit {unit}" in names, names
    assert "Install the readiness wait of on-demand replicas" in names
    running = {c["service"] for c in calls if c.get("running")}
    stopped = {c["service"] for c in calls if c.get("running") is False}
    # the socket runs, the replica waits for a connection (stopped: its unit is new)
    assert running == {"gpuprov-vllm-main.service", "gpuprov-vllm-chat.socket"}
    assert "gpuprov-vllm-chat.service" in stopped
