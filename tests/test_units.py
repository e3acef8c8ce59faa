"""units.converge, the pyinfra operations that keep one unit per service in step: units of
services no longer planned go, with the EnvironmentFiles put for them (they may hold a key).

It runs on this machine (@local) for real, its unit folder and config folder moved under
tmp_path; systemd is not running here, so its operations are recorded instead of run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pyinfra.api.config import Config
from pyinfra.api.connect import connect_all, disconnect_all
from pyinfra.api.deploy import add_deploy, deploy
from pyinfra.api.inventory import Inventory
from pyinfra.api.operations import run_ops
from pyinfra.api.state import State

from provision import units

PATTERN = "gpuprov-llama-*.service"


@pytest.fixture
def local() -> Iterator[State]:
    state = State(Inventory((["@local"], {})), Config())  # type: ignore[no-untyped-call]
    connect_all(state)
    yield state
    disconnect_all(state)


@pytest.fixture
def systemd(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = []

    def record(kind: str) -> Any:
        return lambda **kwargs: calls.append((kind, kwargs))

    monkeypatch.setattr(
        units, "systemd", SimpleNamespace(service=record("service"), daemon_reload=record("reload"))
    )
    return calls


def touch(folder: Path, *names: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_text("LLAMA_API_KEY=secret\n")


def converged(state: State, changed: dict[str, bool], config: Path) -> None:
    @deploy("units")
    def run() -> None:
        units.converge(changed, PATTERN, "profile", str(config))

    add_deploy(state, run)
    run_ops(state)
    assert not state.failed_hosts


def test_removed_service_loses_its_unit_and_env_file(
    local: State,
    systemd: list[tuple[str, dict[str, Any]]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    unit_dir, config = tmp_path / "system", tmp_path / "llama"
    monkeypatch.setattr(units, "UNITS", str(unit_dir))
    touch(
        unit_dir,
        "gpuprov-llama-main.service",
        "gpuprov-llama-old.service",
        "gpuprov-llama-Not_Ours.service",
        "gpuprov-vllm-old.service",
    )
    touch(config, "main.env", "old.env", "Not_Ours.env", "notes.env")
    converged(local, {"gpuprov-llama-main.service": False}, config)
    assert sorted(p.name for p in unit_dir.iterdir()) == [
        "gpuprov-llama-main.service",
        "gpuprov-vllm-old.service",
    ]
    # Only the env file of a removed service gpuprov named; a name it never gives is not its file.
    assert sorted(p.name for p in config.iterdir()) == ["Not_Ours.env", "main.env", "notes.env"]
    stopped = sorted(
        kw["service"] for kind, kw in systemd if kind == "service" and not kw["running"]
    )
    assert stopped == ["gpuprov-llama-Not_Ours.service", "gpuprov-llama-old.service"]


def test_nothing_removed_when_every_unit_is_planned(
    local: State,
    systemd: list[tuple[str, dict[str, Any]]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    unit_dir, config = tmp_path / "system", tmp_path / "llama"
    monkeypatch.setattr(units, "UNITS", str(unit_dir))
    touch(unit_dir, "gpuprov-llama-main.service")
    touch(config, "main.env", "old.env")
    converged(local, {"gpuprov-llama-main.service": False}, config)
    # An env file with no unit of its own is not known to be gpuprov's: it stays.
    assert sorted(p.name for p in config.iterdir()) == ["main.env", "old.env"]
    assert [kw["service"] for _, kw in systemd] == ["gpuprov-llama-main.service"]
