"""Files shipped inside the package (rules, signatures, tables, schemas, roles), found one way.

Everything gpuprov reads at run time is package data located through ``importlib.resources``, so
a wheel installed anywhere works without the repository. The roles and the Ansible playbook ship
as ``provision.roles`` and ``provision.ansible`` (setup.py maps the top-level folders there).
A folder that should hold knowledge but holds none raises ``MissingKnowledge``: an empty load
would turn every diagnosis into a silent "nothing found".
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10
    import tomli as tomllib


class MissingKnowledge(RuntimeError):
    """A packaged file or folder gpuprov needs is absent: a broken install, never a finding."""


def path(package: str, *parts: str) -> Path:
    """The file or folder `parts` inside `package`, as a path on disk."""
    root = resources.files(package)
    if not isinstance(root, Path):  # a zip import; pip installs packages unpacked
        raise MissingKnowledge(f"{package} is not installed as files on disk: {root}")
    found = root.joinpath(*parts)
    if not found.exists():
        raise MissingKnowledge(f"{'/'.join(parts)} is missing from {package} ({found})")
    return found


def toml(text: str) -> dict[str, Any]:
    """Parse TOML text (tomllib, or tomli before Python 3.11)."""
    return tomllib.loads(text)


def read_toml(package: str, *parts: str) -> dict[str, Any]:
    """One packaged TOML file."""
    return toml(path(package, *parts).read_text(encoding="utf-8"))


def toml_folder(package: str, *parts: str) -> list[tuple[str, dict[str, Any]]]:
    """(stem, content) of every *.toml in a packaged folder, by name; MissingKnowledge if none."""
    folder = path(package, *parts)
    files = sorted(folder.glob("*.toml"))
    if not files:
        raise MissingKnowledge(f"no *.toml in {package}/{'/'.join(parts)} ({folder})")
    return [(f.stem, toml(f.read_text(encoding="utf-8"))) for f in files]
