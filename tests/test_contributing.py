"""CONTRIBUTING.md's paths, walked on a copy of the tree.

Adding a rule, a log signature, a probe or a role by touching only the files CONTRIBUTING.md names
makes the suite's own checks for that path pass; leaving one step out makes them fail. Each case
runs pytest in a fresh copy of the working tree. The role case needs the copy's roles/ to be the
packaged roles, so it installs the copy (editable, no dependencies) into a throwaway venv that
borrows this venv's packages.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import venv
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "CONTRIBUTING.md"


def test_every_path_it_names_exists() -> None:
    named = set()
    for span in re.findall(r"`([^`\s]+)`", DOC.read_text()):
        path = span.split("::")[0].rstrip(":")
        if path.startswith(("checks/", "provision/", "roles/", "tests/", "ansible/", "docs/")):
            named.add(path)
    assert len(named) > 20
    for path in sorted(named):
        pattern = re.sub(r"<[^>]+>", "*", path).rstrip("/")
        assert list(ROOT.glob(pattern)), f"CONTRIBUTING.md names {path}, which matches nothing"


def _copy(dest: Path) -> Path:
    files = subprocess.run(
        ["git", "ls-files", "-z", "-co", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for raw in files:
        name = raw.decode()
        if name and (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


def _pytest(python: Path, tree: Path, *tests: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    return subprocess.run(
        [str(python), "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=env,
    )


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


# --- a rule -----------------------------------------------------------------------------------

RULE = '''
[[rule]]
id = "HOST-099"
title = "nvidiafb is loaded"
severity = "warning"
detected_by = ["host"]
check = "module_loaded"
params = { module = "nvidiafb" }
message = "The nvidiafb framebuffer module is loaded; it holds the GPU the NVIDIA driver needs."
fix = "Blacklist nvidiafb in /etc/modprobe.d/, run update-initramfs -u, and reboot."
why = """
nvidiafb is an old framebuffer driver for NVIDIA cards. When it binds the GPU first, the proprietary
driver cannot take the device, and nvidia-smi reports no devices."""
citations = ["https://download.nvidia.com/XFree86/Linux-x86_64/580.65.06/README/commonproblems.html"]
'''


def _modules(loaded: list[str]) -> str:
    return (
        '{"description": "modules", "facts": {"modules": {"loaded": '
        + str(loaded).replace("'", '"')
        + "}}}\n"
    )


def _add_rule(tree: Path, with_pass_fixture: bool = True) -> None:
    _append(tree / "checks/matrix/rules/host.toml", RULE)
    fixtures = tree / "tests/fixtures/rules/HOST-099"
    fixtures.mkdir(parents=True)
    (fixtures / "fail.json").write_text(_modules(["nvidiafb", "nvidia"]))
    if with_pass_fixture:
        (fixtures / "pass.json").write_text(_modules(["nvidia"]))
    docs = subprocess.run(
        [sys.executable, "-m", "checks.matrix.docs"],
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    (tree / "docs/rules.md").write_text(docs.stdout)
    count = tree / "tests/test_rules.py"
    count.write_text(re.sub(r"len\(RULES\) == (\d+)", _plus_one, count.read_text()))


def _plus_one(m: re.Match[str]) -> str:
    return f"len(RULES) == {int(m.group(1)) + 1}"


# --- a log signature --------------------------------------------------------------------------

SIGNATURE = """
[[signature]]
id = "nouveau-installer"
rule = "HOST-002"
pattern = '''The Nouveau kernel driver is currently in use by your system'''
specificity = 80
message = "The NVIDIA installer stopped because nouveau holds the GPU."
fix = "Blacklist nouveau, run update-initramfs -u and reboot; then install the driver."
"""


def _add_signature(tree: Path, with_near_miss: bool = True) -> None:
    _append(tree / "checks/logs/signatures/host.toml", SIGNATURE)
    cases = tree / "tests/fixtures/signatures/nouveau-installer"
    cases.mkdir(parents=True)
    (cases / "match_installer.log").write_text(
        "ERROR: The Nouveau kernel driver is currently in use by your system.  This driver is "
        "incompatible with the NVIDIA driver, and must be disabled before proceeding.\n"
    )
    rows = "nouveau-installer/match_installer.log\tconstructed\n"
    if with_near_miss:
        (cases / "near_blacklisted.log").write_text(
            "Nouveau kernel driver blacklisted; no error found during installation.\n"
        )
        rows += "nouveau-installer/near_blacklisted.log\tconstructed\n"
    _append(tree / "tests/fixtures/signatures/SOURCES.tsv", rows)


# --- a probe ----------------------------------------------------------------------------------

PARSER = '''"""The CPU architecture alone, from `uname -m`."""

from __future__ import annotations

from checks.facts.model import HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

COMMAND = "uname -m"


def parse_machine(text: str) -> HostFacts:
    """`uname -m`: one word such as x86_64 or aarch64."""
    facts = HostFacts()
    words = text.split()
    if len(words) == 1 and words[0].replace("_", "").isalnum():
        facts.system.machine = words[0]
    return facts


def detect_machine(text: str) -> bool:
    return text.strip() in ("x86_64", "aarch64")


FORMATS = [Format("uname-m", detect_machine, parse_machine)]
PROBES = [Probe("machine", COMMAND, parse_machine)]
'''


def _add_probe(tree: Path, with_case: bool = True) -> None:
    (tree / "checks/facts/parsers/machine.py").write_text(PARSER)
    if with_case:
        cases = tree / "tests/fixtures/probes/machine"
        cases.mkdir(parents=True)
        (cases / "aarch64.json").write_text(
            '{"source": "uname -m on a DGX Spark (GB10), as printed by coreutils", '
            '"parser": "parse_machine", "output": ["aarch64"], '
            '"facts": {"system": {"machine": "aarch64"}}}\n'
        )


# --- a role -----------------------------------------------------------------------------------


def _add_role(tree: Path, with_row: bool = True) -> None:
    role = tree / "roles/motd"
    (role / "defaults").mkdir(parents=True)
    (role / "tasks").mkdir()
    (role / "defaults/main.yml").write_text("# A login banner naming the box's services.\n")
    _append(role / "defaults/main.yml", 'motd_text: "served by gpuprov"\n')
    (role / "tasks/main.yml").write_text(
        "# Ansible tasks of the motd role (pyinfra: motd.py beside this file).\n"
        "- name: Write the login banner.\n"
        "  ansible.builtin.copy:\n"
        "    dest: /etc/motd\n"
        '    content: "{{ motd_text }}\\n"\n'
        '    mode: "0644"\n'
    )
    (role / "tasks/motd.py").write_text(
        '"""pyinfra tasks of the motd role (Ansible: main.yml beside this file)."""\n\n'
        "from __future__ import annotations\n\n"
        "from typing import Any\n\n\n"
        "def motd(plan: Any) -> None:\n"
        '    """Nothing to converge in this example."""\n'
    )
    if with_row:
        table = tree / "provision/role_table.py"
        text = table.read_text()
        anchor = '    Role("canary", "canary_"),\n'
        assert anchor in text
        table.write_text(text.replace(anchor, anchor + '    Role("motd", "motd_"),\n'))
    _append(tree / "ansible/site.yml", "    - motd\n")


def _role_python(tree: Path, base: Path) -> Path:
    """A venv with this venv's packages and the copy installed editable, so roles/ is the copy's."""
    env = base / "venv"
    venv.create(env, with_pip=False)
    code = "import sysconfig; print(sysconfig.get_path('purelib'))"
    where = subprocess.run(
        [str(env / "bin/python"), "-c", code], capture_output=True, text=True, check=True
    )
    site = Path(where.stdout.strip())
    (site / "borrowed.pth").write_text(sysconfig.get_path("purelib") + "\n")
    install = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "--python", str(env / "bin/python"), "install", "-q"),
            *("--no-deps", "-e", str(tree)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    return env / "bin/python"


# what: (how to add it, the step that can be left out, the tests to run, the test that catches it)
CASES: dict[str, tuple[Callable[..., None], str, tuple[str, ...], str]] = {
    "rule": (
        _add_rule,
        "with_pass_fixture",
        ("tests/test_rules.py",),
        "test_rule_has_both_fixtures[HOST-099]",
    ),
    "signature": (
        _add_signature,
        "with_near_miss",
        ("tests/test_explain_signatures.py", "tests/test_rules.py"),
        "test_every_signature_has_match_and_near_files[nouveau-installer]",
    ),
    "probe": (
        _add_probe,
        "with_case",
        (
            "tests/test_parser_cases.py",
            "tests/test_parsers_robustness.py",
            "tests/test_real_captures.py",
        ),
        "test_every_parser_module_has_recorded_cases",
    ),
    "role": (
        _add_role,
        "with_row",
        ("tests/test_role_table.py",),
        "test_every_role_folder_has_a_row_and_every_row_a_folder",
    ),
}


@pytest.mark.parametrize("complete", [True, False], ids=["as-documented", "a-step-left-out"])
@pytest.mark.parametrize("what", CASES)
def test_adding_by_the_documented_path(tmp_path: Path, what: str, complete: bool) -> None:
    add, step, tests, catcher = CASES[what]
    tree = _copy(tmp_path / "tree")
    add(tree, **{step: complete})
    python = _role_python(tree, tmp_path) if what == "role" else Path(sys.executable)
    done = _pytest(python, tree, *tests)
    if complete:
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    else:
        assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-2000:]
        failed = re.findall(r"^FAILED \S+::(\S+)", done.stdout, re.MULTILINE)
        assert failed == [catcher], done.stdout[-4000:]
