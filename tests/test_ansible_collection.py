"""The gpuprov.inference collection: built, installed from its tarball, run where gpuprov is absent.

Real: `ansible-galaxy collection build` and `install`, then ansible-playbook on localhost
(connection local) with ANSIBLE_COLLECTIONS_PATH at the install and a PYTHONPATH whose `provision`
and `checks` refuse to import, so the collection's filter plugin cannot lean on gpuprov.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import yaml

from checks import packaged
from checks.facts.model import HostFacts
from provision import ansible_collection, build, filters, quoting, role_table, stack

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.skipif(
    not (BIN / "ansible-galaxy").is_file(), reason="no ansible-core in this venv"
)
SAMPLES = ("/opt/a b/100%", 'say "hi" $HOME', "plain")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(tarball, the folder it is installed in)."""
    base = tmp_path_factory.mktemp("collection")
    tarball = ansible_collection.build(base / "build")
    installed = base / "installed"
    done = subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "install", str(tarball), "-p", str(installed)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    yield tarball, installed


def installed_root(installed: Path) -> Path:
    return installed / "ansible_collections" / "gpuprov" / "inference"


def without_gpuprov(tmp_path: Path, installed: Path) -> dict[str, str]:
    """An environment where `import provision` and `import checks` fail."""
    for name in ("provision", "checks"):
        (tmp_path / "stub" / name).mkdir(parents=True)
        (tmp_path / "stub" / name / "__init__.py").write_text(
            'raise ImportError("gpuprov is absent in this test")\n'
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "PYTHON"))}
    return {
        **env,
        "PYTHONPATH": str(tmp_path / "stub"),
        "ANSIBLE_COLLECTIONS_PATH": str(installed),
        "ANSIBLE_LOCALHOST_WARNING": "false",
    }


def playbook(
    tmp_path: Path, env: dict[str, str], play: list[dict[str, Any]], *args: str
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    inventory = f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}\n"
    (tmp_path / "hosts.ini").write_text(inventory)
    return subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(tmp_path / "hosts.ini"), "play.yml", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        check=False,
        timeout=300,
    )


def local_play(tasks: list[dict[str, Any]], roles: list[Any] | None = None) -> list[dict[str, Any]]:
    play: dict[str, Any] = {"name": "Test", "hosts": "all", "gather_facts": False}
    if roles is not None:
        play["roles"] = roles
    return [{**play, "tasks": tasks}]


def test_galaxy_carries_gpuprovs_version() -> None:
    galaxy = yaml.safe_load(
        ansible_collection.ansible_folder("collection", "galaxy.yml").read_text()
    )
    project = packaged.toml((ROOT / "pyproject.toml").read_text())["project"]
    assert galaxy["version"] == project["version"] == metadata.version("gpuprov")
    assert (galaxy["namespace"], galaxy["name"]) == ("gpuprov", "inference")
    assert "pip install gpuprov" in galaxy["description"]


def test_tarball_has_the_roles_without_their_pyinfra_tasks(built: tuple[Path, Path]) -> None:
    with tarfile.open(built[0]) as tar:
        names = set(tar.getnames())
    for role in role_table.NAMES:
        assert f"roles/{role}/tasks/main.yml" in names
        assert f"roles/{role}/meta/argument_specs.yml" in names
        assert f"roles/{role}/README.md" in names
        assert f"roles/{role}/tasks/{role}.py" not in names
    assert "roles/canary/files/gpuprov_canary.py" in names  # a file the role copies stays
    assert "plugins/plugin_utils/quoting.py" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_the_collections_quoting_is_gpuprovs_and_stdlib_only(built: tuple[Path, Path]) -> None:
    source = packaged.path("provision", "quoting.py")
    copy = installed_root(built[1]) / "plugins" / "plugin_utils" / "quoting.py"
    assert copy.read_bytes() == source.read_bytes()
    tree = ast.parse(source.read_text())
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in (
            node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")]
        )
    }
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}


def test_the_plugin_names_every_filter_of_gpuprov() -> None:
    plugin = ansible_collection.ansible_folder("collection", "plugins", "filter", "gpuprov.py")
    tree = ast.parse(plugin.read_text())
    need = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "NEED_GPUPROV"
    )
    assert not set(need) & set(quoting.FILTERS)
    assert set(need) | set(quoting.FILTERS) == set(filters.registry())
    assert "import provision" not in plugin.read_text().split("def gpuprov_filters")[0]


def test_roles_name_gpuprovs_filters_in_full(built: tuple[Path, Path]) -> None:
    roles = installed_root(built[1]) / "roles"
    texts = [p.read_text() for p in roles.glob("*/*/*") if p.suffix in (".j2", ".yml")]
    assert any("| gpuprov.inference.systemd_quote" in t for t in texts)
    assert all(ansible_collection.qualified(t) == t for t in texts)  # nothing short is left
    assert ansible_collection.qualified("{{ x | systemd_quote }} {{ y | map('shell_quote') }}") == (
        "{{ x | gpuprov.inference.systemd_quote }} {{ y | map('gpuprov.inference.shell_quote') }}"
    )
    assert ansible_collection.qualified("{{ systemd_quote_x | int }}") == (
        "{{ systemd_quote_x | int }}"
    )


def test_filters_work_without_gpuprov(built: tuple[Path, Path], tmp_path: Path) -> None:
    env = without_gpuprov(tmp_path, built[1])
    quoted = {
        name: f"{{{{ samples | map('gpuprov.inference.{name}') | list }}}}"
        for name in ("systemd_quote", "systemd_env", "shell_quote")
    }
    quoted["systemd_path"] = "{{ ['/opt/gpuprov/100%'] | map('gpuprov.inference.systemd_path') }}"
    tasks = [
        {
            "name": "Quote",
            "ansible.builtin.copy": {
                "content": "{{ quoted | to_json }}",
                "dest": str(tmp_path / "quoted.json"),
                "mode": "0644",
            },
            "vars": {"quoted": quoted, "samples": list(SAMPLES)},
        },
        {
            "name": "A filter that needs gpuprov",
            "ansible.builtin.debug": {"msg": "{{ {} | gpuprov.inference.vllm_env }}"},
            "ignore_errors": True,
            "register": "refused",
        },
        {
            "name": "Its message",
            "ansible.builtin.copy": {
                "content": "{{ refused.msg }}",
                "dest": str(tmp_path / "refused.txt"),
                "mode": "0644",
            },
        },
    ]
    done = playbook(tmp_path, env, local_play(tasks))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    got = json.loads((tmp_path / "quoted.json").read_text())
    for name in ("systemd_quote", "systemd_env", "shell_quote"):
        assert got[name] == [quoting.FILTERS[name](s) for s in SAMPLES], name
    assert got["systemd_path"] == [quoting.systemd_path("/opt/gpuprov/100%")]
    message = (tmp_path / "refused.txt").read_text()
    assert "vllm_env needs gpuprov on the controller: pip install gpuprov" in message
    assert "No filter named" not in message


def test_a_role_runs_from_the_collection_without_gpuprov(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    """llama_cpp's build plan, by gpuprov.inference.llama_cpp, names the build as gpuprov does."""
    env = without_gpuprov(tmp_path, built[1])
    tasks = [
        {
            "name": "Plan",
            "ansible.builtin.include_role": {
                "name": "gpuprov.inference.llama_cpp",
                "tasks_from": "plan",
            },
        },
        {
            "name": "Write the plan",
            "ansible.builtin.copy": {
                "content": "{{ {'name': llama_cpp_build_name} | to_json }}",
                "dest": str(tmp_path / "plan.json"),
                "mode": "0644",
            },
        },
    ]
    done = playbook(tmp_path, env, local_play(tasks))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    expected = build.plan(stack.from_data({}), HostFacts(), "")
    assert json.loads((tmp_path / "plan.json").read_text())["name"] == expected.name


def test_a_play_of_every_role_passes_the_syntax_check(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    env = without_gpuprov(tmp_path, built[1])
    roles = [f"gpuprov.inference.{role}" for role in role_table.NAMES]
    done = playbook(tmp_path, env, local_play([], roles), "--syntax-check")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


@pytest.mark.parametrize(
    ("role", "variables", "named"),
    [
        ("canary", {"canary_interval": "eighty"}, "canary_interval"),
        ("nginx_lb", {"nginx_lb_listen": "eighty"}, "nginx_lb_listen"),
        ("nvidia_container_toolkit", {"nvidia_container_toolkit_mode": "lxc"}, "mode"),
        (
            "llama_server",
            {"llama_server_profiles": [{"name": "m", "model": "/m.gguf", "port": "eighty"}]},
            "port",
        ),
        ("llama_server", {"llama_server_profiles": [{"name": "m", "port": 8080}]}, "model"),
        (
            "vllm",
            {"vllm_replicas": [{"name": "r", "model": "m/m", "port": 8000, "gpus": ["zero"]}]},
            "gpus",
        ),
    ],
)
def test_argument_specs_refuse_bad_values(
    built: tuple[Path, Path], tmp_path: Path, role: str, variables: dict[str, Any], named: str
) -> None:
    env = without_gpuprov(tmp_path, built[1])
    roles = [{"role": f"gpuprov.inference.{role}", "vars": variables}]
    done = playbook(tmp_path, env, local_play([], roles), "--check")
    assert done.returncode != 0
    assert "Validating arguments against arg spec" in done.stdout
    assert named in done.stdout.split("Validating arguments against arg spec", 1)[1]


def spec_options(role: str) -> dict[str, Any]:
    path = role_table.role_path(role, "meta", "argument_specs.yml")
    options: dict[str, Any] = yaml.safe_load(path.read_text())["argument_specs"]["main"]["options"]
    return options


@pytest.mark.parametrize("role", role_table.NAMES)
def test_argument_spec_matches_the_defaults(role: str) -> None:
    defaults = yaml.safe_load(role_table.role_path(role, "defaults", "main.yml").read_text())
    options = spec_options(role)
    assert set(options) == set(defaults)
    for key, spec in options.items():
        assert spec.get("description"), key
        assert spec["default"] == defaults[key], key
        if isinstance(defaults[key], dict) and "options" in spec:
            assert set(spec["options"]) == set(defaults[key]), key
            for name, value in defaults[key].items():
                assert spec["options"][name]["default"] == value, f"{key}.{name}"


@pytest.mark.parametrize(
    ("items", "defaults"),
    [("llama_server_profiles", "llama_server_defaults"), ("vllm_replicas", "vllm_defaults")],
)
def test_item_options_are_the_defaults_and_what_each_item_needs(items: str, defaults: str) -> None:
    role = items.rsplit("_", 1)[0]
    options = spec_options(role)
    item, base = options[items]["options"], options[defaults]["options"]
    required = {k for k, v in item.items() if v.get("required")}
    assert set(base) <= set(item)
    assert set(item) - set(base) - required <= {"alias"}  # a profile's own name by default
    assert {"name", "port"} <= required


@pytest.mark.parametrize("role", role_table.NAMES)
def test_meta_names_the_platforms(role: str) -> None:
    meta = yaml.safe_load(role_table.role_path(role, "meta", "main.yml").read_text())
    info = meta["galaxy_info"]
    assert info["role_name"] == role
    assert {p["name"] for p in info["platforms"]} == {"Debian", "Ubuntu"}
    assert info["min_ansible_version"] == "2.17"


@pytest.mark.parametrize("role", role_table.NAMES)
def test_readme_is_generated_and_documents_every_variable(role: str) -> None:
    readme = role_table.role_path(role, "README.md").read_text()
    assert readme == ansible_collection.role_readme(role), (
        "run .venv/bin/python -m provision.ansible_collection --readmes"
    )
    defaults = yaml.safe_load(role_table.role_path(role, "defaults", "main.yml").read_text())
    for key in defaults:
        assert f"- `{key}` (" in readme, key
    assert f"role: gpuprov.inference.{role}" in readme
