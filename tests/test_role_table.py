"""The role table: every role folder has a row, every row a folder, and both engines follow it.

Also the one filter registry: pyinfra renders with it, Ansible loads it through one plugin.
"""

from __future__ import annotations

import ast
import runpy
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from checks.facts.model import HostFacts
from provision import (
    deploy,
    filters,
    nginx,
    quoting,
    role_table,
    servicefacts,
    stack,
    templates,
    toolkit,
    vllm,
)
from provision.gate import HostGate
from provision.hostplan import HostPlan
from provision.settings import llama_server

ROOT = Path(__file__).resolve().parent.parent
ROLES = ROOT / "roles"
PROFILE = {"name": "main", "model": "/srv/models/m.gguf", "port": 8080}
REPLICA = {"name": "r1", "model": "Qwen/Qwen3-8B", "port": 8500, "gpus": [0]}
HOSTS = {
    "empty": {},
    "llama": {"llama_server_profiles": [PROFILE]},
    "vllm": {"vllm_replicas": [REPLICA]},
    "both": {"llama_server_profiles": [PROFILE], "vllm_replicas": [REPLICA]},
}


def role_folders() -> set[str]:
    return {p.name for p in ROLES.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}


def role_variables(role: str, kind: str) -> dict[str, Any]:
    path = ROLES / role / kind / "main.yml"
    return (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}


def test_every_role_folder_has_a_row_and_every_row_a_folder() -> None:
    assert sorted(role_folders()) == sorted(role_table.NAMES)
    assert len(set(role_table.NAMES)) == len(role_table.NAMES)


@pytest.mark.parametrize("role", role_table.NAMES)
def test_a_row_has_the_files_both_engines_run(role: str) -> None:
    """defaults/main.yml and tasks/main.yml for Ansible, tasks/<role>.py:<role>() for pyinfra."""
    assert (ROLES / role / "defaults" / "main.yml").is_file()
    assert (ROLES / role / "tasks" / "main.yml").is_file()
    entry = ROLES / role / "tasks" / f"{role}.py"
    functions = {
        n.name for n in ast.parse(entry.read_text()).body if isinstance(n, ast.FunctionDef)
    }
    assert role in functions


@pytest.mark.parametrize("row", role_table.ROLES, ids=role_table.NAMES)
def test_a_role_defines_only_names_under_its_prefix(row: role_table.Role) -> None:
    """defaults/ under the prefix, vars/ (the role's own, not for inventories) under _prefix."""
    defaults = role_variables(row.name, "defaults")
    assert defaults
    assert [k for k in defaults if not k.startswith(row.prefix)] == []
    assert [k for k in role_variables(row.name, "vars") if not k.startswith(f"_{row.prefix}")] == []


def test_prefixes_do_not_overlap() -> None:
    """Each variable belongs to one role; a family is a start of its own row's prefix."""
    for row in role_table.ROLES:
        others = [r.prefix for r in role_table.ROLES if r is not row]
        assert not [p for p in others if p.startswith(row.prefix)], row.name
        assert row.prefix.startswith(row.family), row.name


@pytest.mark.parametrize("name", sorted({*role_table.PREFIXES, "llama_", "nvidia_container_"}))
def test_an_unknown_name_under_a_prefix_is_refused(tmp_path: Path, name: str) -> None:
    """Every prefix and family of the table (llama_, nvidia_container_ among them)."""
    path = tmp_path / "inv.py"
    path.write_text(f'box = [("box", {{"{name}nosuch": 1, "my_own_var": 1}})]\n')
    _, _, hosts = deploy.load_inventory(str(path))
    with pytest.raises(deploy.InventoryError) as caught:
        deploy.validate(str(path), hosts)
    assert str(caught.value) == f"{path}: host 'box': {name}nosuch: unknown setting"


def test_a_name_under_no_prefix_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "inv.py"
    path.write_text('box = [("box", {"my_own_var": 1, "llama": 2, "vllm": 3})]\n')
    _, _, hosts = deploy.load_inventory(str(path))
    assert list(deploy.validate(str(path), hosts)) == ["box"]


def test_a_role_takes_results_of_earlier_roles_that_run_with_it() -> None:
    for i, row in enumerate(role_table.ROLES):
        for name in row.takes:
            j = role_table.NAMES.index(name)
            assert j < i, row.name
            assert role_table.ROLES[j].when == row.when, row.name


def site_roles() -> list[tuple[str, str]]:
    """ansible/site.yml's roles as (name, when)."""
    (play,) = yaml.safe_load((ROOT / "ansible" / "site.yml").read_text())
    found = []
    for entry in play["roles"]:
        if isinstance(entry, str):
            found.append((entry, ""))
        else:
            assert set(entry) <= {"role", "when"}, entry
            found.append((entry["role"], entry.get("when", "")))
    return found


def test_site_yml_runs_the_table() -> None:
    """Same roles, same order, same `when` as `gpuprov apply`."""
    expected = [(row.name, row.when) for row in role_table.ROLES]
    wanted = yaml.safe_dump(
        [{"role": n, "when": w} if w else n for n, w in expected], sort_keys=False, width=200
    )
    assert site_roles() == expected, f"ansible/site.yml's roles should read:\n{wanted}"


# Where the gate expects each condition's roles to run.
MEANING: dict[str, Callable[[stack.Stack], bool]] = {
    role_table.BUILDS_LLAMA: lambda s: s.builds_llama,
    role_table.HAS_REPLICAS: lambda s: bool(s.vllm.replicas),
}


@pytest.mark.parametrize("host", HOSTS)
def test_when_agrees_with_the_stack(host: str) -> None:
    data = HOSTS[host]
    s, variables = stack.from_data(data), stack.variables(data)
    for row in role_table.ROLES:
        runs = role_table.runs(row, variables)  # a boolean, or TypeError
        if not row.when:
            assert runs, (host, row.name)
        elif row.when in MEANING:
            assert runs is MEANING[row.when](s), (host, row.name)


def test_when_must_give_a_boolean() -> None:
    row = role_table.Role("x", "x_", when="vllm_replicas")
    with pytest.raises(TypeError, match="not a boolean"):
        role_table.runs(row, {"vllm_replicas": []})


def plan(data: dict[str, Any]) -> HostPlan:
    return HostPlan(
        "box", stack.from_data(data), stack.variables(data), HostGate("box", HostFacts())
    )


def fake_roles(calls: list[tuple[str, tuple[Any, ...]]]) -> dict[str, Any]:
    """Stand-ins for the roles' task modules that record each entry's call and return its name."""

    def entry(name: str) -> Callable[..., str]:
        def call(plan: HostPlan, *results: Any) -> str:
            calls.append((name, results))
            return f"{name} result"

        return call

    return {name: SimpleNamespace(**{name: entry(name)}) for name in role_table.NAMES}


@pytest.mark.parametrize(
    ("host", "skipped"),
    [
        ("empty", {"nvidia_container_toolkit"}),
        ("llama", {"nvidia_container_toolkit"}),
        ("vllm", {"build_toolchain", "llama_cpp", "llama_server"}),
        ("both", set()),
    ],
)
def test_converge_runs_the_rows_in_order(host: str, skipped: set[str]) -> None:
    """Every row in table order, but those whose `when` is false for the host."""
    calls: list[tuple[str, tuple[Any, ...]]] = []
    deploy.run_roles(plan(HOSTS[host]), fake_roles(calls))
    expected = [name for name in role_table.NAMES if name not in skipped]
    assert [name for name, _ in calls] == expected
    takes = {name: results for name, results in calls if results}
    assert takes == ({"llama_server": ("llama_cpp result",)} if "llama_cpp" in expected else {})


def test_the_entries_load_from_the_packaged_roles() -> None:
    loaded = deploy.roles()
    assert list(loaded) == list(role_table.NAMES)
    assert all(callable(getattr(loaded[name], name)) for name in role_table.NAMES)


# --- the filter registry ----------------------------------------------------------------------


def test_the_registry_holds_every_module_filter() -> None:
    merged: dict[str, Any] = {}
    for module in (quoting, vllm, nginx, toolkit, llama_server, servicefacts):
        assert not set(module.FILTERS) & set(merged), module.__name__
        merged.update(module.FILTERS)
    assert dict(filters.registry()) == merged
    environment = templates.environment().filters
    assert {name: environment[name] for name in merged} == merged


def test_one_ansible_plugin_loads_the_registry() -> None:
    """ansible/filter_plugins/gpuprov.py, through ansible.cfg; no role has plugins of its own."""
    folder = ROOT / "ansible" / "filter_plugins"
    config = (ROOT / "ansible" / "ansible.cfg").read_text()
    assert "\nfilter_plugins = ./filter_plugins\n" in config
    assert sorted(p.name for p in folder.glob("*.py")) == ["gpuprov.py"]
    assert sorted(ROLES.glob("*/filter_plugins")) == []
    assert not (ROOT / "ansible" / "__init__.py").exists()  # it would shadow the ansible package
    plugin = runpy.run_path(str(folder / "gpuprov.py"))["FilterModule"]()
    assert plugin.filters() == dict(filters.registry())
