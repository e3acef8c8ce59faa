"""The package as users install it: sdist -> wheel -> a fresh venv outside the checkout.

`python -m build` makes the sdist and builds the wheel from it (so both carry every packaged
file); the wheel goes into a new venv under a temporary directory with its dependencies from the
package index, and every command runs from another directory with a clean environment. Its
answers must equal the editable install's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURES

ROOT = Path(__file__).resolve().parent.parent
EDITABLE = Path(sys.executable).parent / "gpuprov"
LOG = FIXTURES / "real" / "err804__vllm-4940_docker-run.txt"
HOME_LIKE = """\
local = [
    (
        "@local",
        {
            "llama_server_profiles": [
                {"name": "main", "model": "/srv/models/model.gguf", "port": 8080},
            ],
        },
    ),
]
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """gpuprov from a wheel built from the sdist, in a fresh venv outside the checkout."""
    base = tmp_path_factory.mktemp("wheel")
    dist = base / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    wheel = next(dist.glob("gpuprov-*.whl"))
    env_dir = base / "venv"
    venv.create(env_dir, with_pip=True)
    pip = subprocess.run(
        [str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        cwd=base,
    )
    assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
    yield env_dir / "bin" / "gpuprov"
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory with nothing of the checkout in it."""
    where = tmp_path_factory.mktemp("elsewhere")
    shutil.copy(LOG, where / "vllm.log")
    (where / "home.py").write_text(HOME_LIKE)
    return where


def run(gpuprov: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["COLUMNS"] = "120"
    return subprocess.run(
        [str(gpuprov), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=cwd,
        env=env,
    )


def both(installed: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed wheel's run, asserted equal to the editable install's."""
    wheel = run(installed, cwd, *args)
    editable = run(EDITABLE, cwd, *args)
    assert wheel.returncode == editable.returncode, wheel.stderr + editable.stderr
    assert wheel.stdout == editable.stdout
    return wheel


def test_the_wheel_is_installed_outside_the_checkout(installed: Path, elsewhere: Path) -> None:
    code = "import checks, provision.roles; print(checks.__file__, provision.roles.__file__)"
    python = installed.parent / "python"
    done = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, cwd=elsewhere, check=True
    )
    assert str(ROOT) not in done.stdout
    assert str(installed.parent.parent) in done.stdout


def test_version(installed: Path, elsewhere: Path) -> None:
    done = both(installed, elsewhere, "--version")
    assert done.returncode == 0
    assert done.stdout.startswith("gpuprov 0.")


def _stable(report: dict[str, Any]) -> dict[str, Any]:
    """A check report without what differs between two runs: probe timings, the interpreter."""
    facts = dict(report["facts"])
    facts.pop("python", None)  # each install's own venv is on its path
    facts.pop("probes", None)
    return {**report, "facts": facts}


def test_check_json(installed: Path, elsewhere: Path) -> None:
    wheel = run(installed, elsewhere, "check", "--json", "--fail-on", "never")
    editable = run(EDITABLE, elsewhere, "check", "--json", "--fail-on", "never")
    assert wheel.returncode == editable.returncode == 0, wheel.stderr
    assert _stable(json.loads(wheel.stdout)) == _stable(json.loads(editable.stdout))
    assert json.loads(wheel.stdout)["schema_version"]


def test_rules(installed: Path, elsewhere: Path) -> None:
    done = both(installed, elsewhere, "rules", "CTR-002")
    assert done.returncode == 0
    assert "Error 804" in done.stdout
    listing = both(installed, elsewhere, "rules", "--json")
    assert len(json.loads(listing.stdout)["rules"]) > 30


def test_explain_diagnoses_a_known_log(installed: Path, elsewhere: Path) -> None:
    done = both(installed, elsewhere, "explain", "vllm.log", "--json")
    assert done.returncode == 1, "a known failure exits 1"
    assert "CTR-002" in done.stdout
    text = both(installed, elsewhere, "explain", "vllm.log")
    assert "CTR-002" in text.stdout


def test_plan_renders_the_roles(installed: Path, elsewhere: Path) -> None:
    """The plan needs every role's defaults and templates; both installs plan the same build."""
    done = both(installed, elsewhere, "plan", "home.py", "--json")
    plan = json.loads(done.stdout)
    assert "@local" in json.dumps(plan)
    assert '"name": "b' in done.stdout  # the llama.cpp build named from the packaged roles
    # --force: this machine has no /srv/models/model.gguf, which blocks the host (LCPP-011)
    text = run(installed, elsewhere, "plan", "home.py", "--force")
    assert "Traceback" not in text.stderr
    assert "gpuprov-llama-main" in text.stdout + text.stderr


def test_every_packaged_file_ships(installed: Path) -> None:
    """Every tracked file of checks/, roles/ and ansible/ is in the wheel at its package path."""
    wheel = next((installed.parent.parent.parent / "dist").glob("gpuprov-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    tracked = subprocess.run(
        ["git", "ls-files", "checks", "roles", "ansible"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    ).stdout.split()
    missing = []
    for path in tracked:
        top, _, rest = path.partition("/")
        shipped = f"provision/{top}/{rest}" if top in ("roles", "ansible") else path
        if shipped not in names:
            missing.append(path)
    assert tracked
    assert missing == []
