"""ansible-lint --profile production is clean on the gpuprov.inference collection.

It lints the assembled collection (provision/ansible_collection.py), whose .ansible-lint holds the
only skips, each with its reason, and the roles/ and ansible/site.yml the repository runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from provision import ansible_collection

ROOT = Path(__file__).resolve().parent.parent
LINT = Path(sys.executable).parent / "ansible-lint"
CONFIG = ansible_collection.ansible_folder("collection", ".ansible-lint")
pytestmark = pytest.mark.skipif(
    not LINT.is_file(), reason="no ansible-lint in this venv (pip install -e '.[test]')"
)


def lint(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env["PATH"] = f"{LINT.parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        [str(LINT), "--offline", "--profile", "production", "-f", "pep8", "-c", str(CONFIG), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**env, "NO_COLOR": "1"},
        check=False,
        timeout=600,
    )


def test_the_collection_is_clean(tmp_path: Path) -> None:
    root = ansible_collection.assemble(tmp_path)
    done = lint(root)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-3000:]
    assert "Passed" in done.stderr + done.stdout


def test_the_roles_and_the_play_are_clean() -> None:
    done = lint(ROOT, "roles", "ansible/site.yml")
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-3000:]


def test_every_skip_has_its_reason() -> None:
    lines = CONFIG.read_text().splitlines()
    start = lines.index("skip_list:")
    for i, line in enumerate(lines[start + 1 :], start + 1):
        if line.startswith("  - "):
            assert lines[i - 1].lstrip().startswith("#"), f"{line}: no reason above it"
