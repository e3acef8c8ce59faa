"""Steps that cross the network are retried, by both engines, with provision/retry.py's numbers."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import yaml

from provision import retry

ROOT = Path(__file__).resolve().parent.parent
ROLES = sorted(ROOT.glob("roles/*/tasks"))


def _name(call: ast.Call) -> str:
    for keyword in call.keywords:
        if keyword.arg == "name" and isinstance(keyword.value, (ast.Constant, ast.JoinedStr)):
            return ast.unparse(keyword.value)
    return ""


def _network_calls() -> list[tuple[str, ast.Call]]:
    """apt operations, and shell operations that pull, add a repository or install."""
    found = []
    for folder in ROLES:
        for path in folder.glob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                    continue
                owner = ast.unparse(node.func.value)
                name = _name(node)
                if owner == "apt" or (
                    owner == "server"
                    and node.func.attr == "shell"
                    and any(w in name for w in ("Pull ", "apt repository", "Container Toolkit"))
                ):
                    found.append((f"{path.name}: {name}", node))
    return found


def test_network_operations_are_retried() -> None:
    calls = _network_calls()
    assert len(calls) >= 7  # 4 apt installs, a CUDA repository, the toolkit's two steps, a pull
    for where, call in calls:
        keywords = {k.arg: ast.unparse(k.value) for k in call.keywords}
        assert keywords.get("_retries") == "retry.ATTEMPTS", where
        assert keywords.get("_retry_delay") == "retry.DELAY", where


class _Loader(yaml.SafeLoader):
    """Ansible's YAML: `!unsafe` marks a string Jinja must not template."""


_Loader.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))


def _tasks(items: list[Any]) -> list[dict[str, Any]]:
    out = []
    for item in items or []:
        out.append(item)
        out += _tasks(item.get("block", []))
    return out


def test_ansible_retries_the_same_steps() -> None:
    retried = 0
    for folder in ROLES:
        for path in folder.glob("*.yml"):
            for task in _tasks(yaml.load(path.read_text(), Loader=_Loader)):
                apt = "ansible.builtin.apt" in task or "ansible.builtin.package" in task
                argv = task.get("ansible.builtin.command", {})
                pull = isinstance(argv, dict) and "pull" in argv.get("argv", [])
                if apt or pull:
                    where = f"{path.relative_to(ROOT)}: {task.get('name')}"
                    assert task.get("until") == f"{task.get('register')} is succeeded", where
                    assert (task.get("retries"), task.get("delay")) == (
                        retry.ATTEMPTS,
                        retry.DELAY,
                    ), where
                    retried += 1
    assert retried >= 5
