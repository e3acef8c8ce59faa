"""The post-apply check's pure parts: which units a host's stack runs, and how a unit's state over
the check turns into running or failing. The check itself runs on real systemd test hosts
(tests/e2e/test_apply_llama.py, tests/e2e/test_apply_vllm.py); here the unit properties are
`systemctl show` output recorded on such a host (tests/fixtures/systemd/show/verify-*.txt,
their sources in tests/fixtures/systemd/SOURCES.tsv)."""

from __future__ import annotations

from typing import Any

import pytest

from checks.facts.model import HostFacts
from provision import stack, verify
from provision.gate import HostGate
from provision.hostplan import HostPlan
from tests.conftest import FIXTURES

PROFILE = {"name": "alpha", "model": "/srv/m.gguf", "port": 8081}
REPLICA = {"name": "q1", "model": "Qwen/Qwen3-8B", "port": 8500, "gpus": [0]}


def plan(**data: Any) -> HostPlan:
    return HostPlan(
        "box", stack.from_data(data), stack.variables(data), HostGate("box", HostFacts())
    )


def show(name: str) -> dict[str, str]:
    """A recorded `systemctl show -p ...` as verify_round.py parses it."""
    text = (FIXTURES / "systemd" / "show" / f"verify-{name}.txt").read_text()
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def test_targets_of_a_llama_and_vllm_host_behind_the_balancer() -> None:
    found = verify.targets(
        plan(
            llama_server_profiles=[PROFILE],
            vllm_replicas=[REPLICA],
            nginx_lb_enabled=True,
            llama_server_startup_seconds=120,
        )
    )
    by_unit = {t.unit: t for t in found}
    assert list(by_unit) == [
        "gpuprov-llama-alpha.service",
        "gpuprov-vllm-q1.service",
        "nginx.service",
        "gpuprov-canary.timer",
    ]
    llama = by_unit["gpuprov-llama-alpha.service"]
    assert (llama.kind, llama.url, llama.model, llama.startup) == (
        "llama",
        "http://127.0.0.1:8081",
        "alpha",
        120,
    )
    assert llama.env_file == "/etc/gpuprov/llama/alpha.env"
    assert (by_unit["gpuprov-vllm-q1.service"].kind, by_unit["nginx.service"].kind) == (
        "openai",
        "balancer",
    )
    assert by_unit["gpuprov-vllm-q1.service"].startup == 900
    assert by_unit["gpuprov-canary.timer"].kind == ""


def test_without_the_canary_only_unit_states_are_checked() -> None:
    found = verify.targets(plan(llama_server_profiles=[PROFILE], canary_enabled=False))
    assert [(t.unit, t.kind) for t in found] == [("gpuprov-llama-alpha.service", "")]


def test_startup_bounds_are_validated() -> None:
    with pytest.raises(stack.StackError, match="llama_server_startup_seconds"):
        stack.from_data({"llama_server_startup_seconds": 0})
    with pytest.raises(stack.StackError, match="vllm_startup_seconds"):
        stack.from_data({"vllm_startup_seconds": "soon"})


def llama_target(startup: int = 60) -> verify.Target:
    return verify.Target("u.service", "llama", "http://127.0.0.1:1", "m", "/e", startup)


def test_a_unit_that_stays_up_and_answers_passes() -> None:
    watch = verify._Watch([llama_target()], {"u.service": show("active")})
    watch.states({"u.service": show("active")}, settled=True)
    watch.probes({"u.service": ["loading", "model still loading"]}, elapsed=5)
    assert watch.pending() and not watch.failed
    watch.probes({"u.service": ["ok", "1 token in 0.02s ('x')"]}, elapsed=9)
    assert (watch.pending(), watch.failed) == ([], {})
    assert watch.answered["u.service"] == "ok: 1 token in 0.02s ('x')"


def test_a_crash_looping_unit_fails_with_its_restarts() -> None:
    watch = verify._Watch([llama_target()], {"u.service": show("active")})
    watch.states({"u.service": show("auto-restart")}, settled=True)
    state, detail, restarts = watch.failed["u.service"]
    assert state == "activating (auto-restart)"
    assert restarts >= 1 and detail.startswith(f"restarted {restarts} times (last exit status 1)")
    assert watch.pending() == []


def test_a_unit_restarted_by_hand_or_by_the_canary_counts_as_a_restart() -> None:
    first = show("active")
    later = {**first, "ExecMainStartTimestampMonotonic": "999999999999"}
    watch = verify._Watch([llama_target()], {"u.service": first})
    watch.states({"u.service": later}, settled=True)
    assert "u.service" in watch.failed


def test_a_stopped_unit_fails_once_settled() -> None:
    watch = verify._Watch([verify.Target("nginx.service")], {"nginx.service": show("active")})
    inactive = {**show("active"), "ActiveState": "inactive", "SubState": "dead"}
    watch.states({"nginx.service": inactive}, settled=True)
    assert watch.failed["nginx.service"][1] == "not active: inactive (dead), result success"


def test_a_server_that_never_answers_fails_after_its_startup_bound() -> None:
    watch = verify._Watch([llama_target(startup=30)], {"u.service": show("active")})
    watch.probes({"u.service": ["fail", "ConnectionError"]}, elapsed=29)
    assert not watch.failed
    watch.probes({"u.service": ["fail", "ConnectionError"]}, elapsed=31)
    assert watch.failed["u.service"][1] == (
        "no completion within 30s (last probe: fail, ConnectionError)"
    )


def test_journal_lines_are_explained() -> None:
    """A vLLM unit's journal holds what `docker run` printed (a real Error 804 log, vllm#4940)."""
    text = (FIXTURES / "real" / "err804__vllm-4940_docker-run.txt").read_text()
    found = verify.diagnose(text.splitlines()[-verify.JOURNAL_LINES :], None)
    assert found and found[0].rule == "CTR-002"
