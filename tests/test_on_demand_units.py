"""On-demand llama.cpp profiles and swap groups: the settings, the three units each gets (the
socket that owns the port, systemd-socket-proxyd's unit, the server), the canary's view of them,
and the VRAM budget of a swap group. systemd-analyze verifies the units here; systemd running
them is tested in tests/e2e/test_on_demand.py."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from provision import stack, templates, units, vram
from provision.settings.read import StackError
from tests.test_quoting import needs_verify, verify

MODEL = "/srv/models/m.gguf"
DEMAND = {"name": "chat", "model": MODEL, "port": 8080, "residency": "on_demand"}
A = {"name": "coder", "model": MODEL, "port": 8081, "swap_group": "big"}
B = {"name": "writer", "model": MODEL, "port": 8082, "swap_group": "big"}
PROXYD = "/usr/lib/systemd/systemd-socket-proxyd"


def _stack(*profiles: dict[str, Any], **more: Any) -> stack.Stack:
    return stack.from_data({"llama_server_profiles": list(profiles), **more})


def _render(name: str, profiles: tuple[dict[str, Any], ...], index: int, **settings: Any) -> str:
    """One of a profile's unit templates, as the role renders it (its swap peers included)."""
    data = {"llama_server_profiles": list(profiles), **settings}
    s = stack.from_data(data)
    p = s.profiles[index]
    peers = [q.name for q in s.profiles if q.swap_group and q.swap_group == p.swap_group]
    profile = dataclasses.asdict(p)
    if name != "llama-server.service.j2":  # the socket and proxy: as the role renders them
        return templates.render(
            "llama_server",
            name,
            **units.on_demand_variables(p.unit, "llama.cpp server", profile, PROXYD),
        )
    return templates.render(
        "llama_server",
        name,
        profile=profile,
        **stack.variables(data),
        systemd_version=252,
        nvidia_persistenced=False,
        llama_server_swap_peers=[n for n in peers if n != p.name],
        llama_server_socket_proxyd=PROXYD,
    )


def test_residency_defaults_and_backend_ports() -> None:
    resident, demand, member = _stack(
        {"name": "r", "model": MODEL, "port": 8079}, DEMAND, A
    ).profiles
    assert (resident.residency, resident.backend_port, resident.on_demand) == ("resident", 0, False)
    assert (demand.residency, demand.backend_port, demand.idle_seconds) == ("on_demand", 18080, 600)
    assert member.on_demand and member.swap_group == "big"  # a group member is on demand


@pytest.mark.parametrize(
    ("profiles", "where", "why"),
    [
        ([{**DEMAND, "residency": "sometimes"}], "residency", "one of resident, on_demand"),
        ([{**DEMAND, "idle_seconds": 0}], "idle_seconds", ""),
        ([{**DEMAND, "port": 60000}], "backend_port", "past 65535"),
        ([DEMAND, {"name": "x", "model": MODEL, "port": 18080}], "backend_port", "another"),
        ([{**DEMAND, "swap_group": "Big Group"}], "swap_group", ""),
    ],
)
def test_bad_residency_settings_name_the_field(
    profiles: list[dict[str, Any]], where: str, why: str
) -> None:
    with pytest.raises(StackError) as found:
        _stack(*profiles)
    assert where in str(found.value) and why in str(found.value)


def test_an_on_demand_server_listens_behind_its_socket() -> None:
    unit = _render("llama-server.service.j2", (DEMAND,), 0)
    assert "--host 127.0.0.1 --port 18080" in unit.replace('"', "")
    assert "StopWhenUnneeded=yes" in unit and "Restart=on-failure" in unit
    # every wake and swap is a start: systemd 252's start limit would refuse the sixth
    assert "StartLimitIntervalSec=0" in unit and "StartLimitBurst" not in unit
    assert "[Install]" not in unit  # never started at boot: the socket starts it
    assert (
        'ExecStartPost="/usr/local/lib/gpuprov/gpuprov-wait-ready.py" '
        '"http://127.0.0.1:18080/health" 300'
    ) in unit
    socket = _render("llama-server.socket.j2", (DEMAND,), 0)
    assert "ListenStream=127.0.0.1:8080" in socket
    assert "Service=gpuprov-llama-chat-proxy.service" in socket
    proxy = _render("llama-server-proxy.service.j2", (DEMAND,), 0)
    assert (
        'ExecStart="/usr/lib/systemd/systemd-socket-proxyd" --exit-idle-time=600s 127.0.0.1:18080'
        in proxy
    )
    assert "Requires=gpuprov-llama-chat.service gpuprov-llama-chat.socket" in proxy
    assert "After=gpuprov-llama-chat.service gpuprov-llama-chat.socket" in proxy
    assert "StartLimitIntervalSec=0" in proxy


def test_a_resident_unit_is_as_before() -> None:
    unit = _render("llama-server.service.j2", ({"name": "r", "model": MODEL, "port": 8079},), 0)
    assert "StopWhenUnneeded" not in unit and "Restart=always" in unit
    assert "WantedBy=multi-user.target" in unit and "ExecStartPost" not in unit


def test_swap_group_members_conflict_with_each_other() -> None:
    c = _stack(A, B, {**A, "name": "third", "port": 8083})
    assert [p.name for p in c.profiles] == ["coder", "writer", "third"]
    unit = _render("llama-server.service.j2", (A, B, {**A, "name": "third", "port": 8083}), 0)
    assert "Conflicts=gpuprov-llama-writer.service" in unit
    assert "Conflicts=gpuprov-llama-third.service" in unit
    assert "Conflicts=gpuprov-llama-coder.service" not in unit


def test_an_ipv6_or_wildcard_socket() -> None:
    socket = _render("llama-server.socket.j2", ({**DEMAND, "host": "::"},), 0)
    assert "ListenStream=[::]:8080" in socket


@needs_verify
def test_systemd_verifies_the_three_units(tmp_path: Path) -> None:
    prefix = tmp_path / "opt"
    binary = prefix / "current" / "bin" / "llama-server"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\nexit 0\n")
    binary.chmod(0o755)
    wait = tmp_path / "wait-ready.py"
    wait.write_text("#!/bin/sh\nexit 0\n")
    wait.chmod(0o755)
    if not Path(PROXYD).is_file():
        pytest.skip("no systemd-socket-proxyd here")
    settings = {"llama_cpp_prefix": str(prefix), "llama_server_wait_ready": str(wait)}
    profiles = (DEMAND, A, B)
    paths = []
    for index, p in enumerate(stack.from_data({"llama_server_profiles": list(profiles)}).profiles):
        for name, template in (
            (p.unit, "llama-server.service.j2"),
            (p.socket_unit, "llama-server.socket.j2"),
            (p.proxy_unit, "llama-server-proxy.service.j2"),
        ):
            path = tmp_path / name
            path.write_text(_render(template, profiles, index, **settings))
            paths.append(path)
    done = verify(*paths)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == ""


def test_a_swap_group_counts_its_largest_member_once() -> None:
    holders = (
        vram.Holder("resident", 4000, "x"),
        vram.Holder("coder", 15000, "x", group="big"),
        vram.Holder("writer", 9000, "x", group="big"),
        vram.Holder("chat", 2000, "x"),  # on demand, outside any group: may run with the others
    )
    row = vram.GpuRow(0, "RTX 3090", 24576, holders)
    assert row.used_mib == 4000 + 15000 + 2000
    assert not row.over  # 21000 of 24576, where a sum of all would be 30000
