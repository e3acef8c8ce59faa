"""The quoting filters, proven against the parsers that read their output.

Real: systemd 252's own unit parser, run two ways offline (no systemd as PID 1 is needed):
`systemd-analyze verify` (it checks syntax and that ExecStart's binary exists, so a decoded binary
path is compared with a real file), and `systemd --test --user` run as `nobody`, which loads a unit
and dumps what it parsed, ExecStart's argv included; and /bin/sh for `shell_quote`. ExecStart
arguments are expanded for `$VAR` only when systemd starts the process, so the dump still shows
`$$` where a literal `$` is meant (systemd.service(5): 'Use "$$" to pass a literal dollar sign').
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from provision.quoting import (
    FILTERS,
    QuotingError,
    shell_quote,
    systemd_env,
    systemd_path,
    systemd_quote,
)

SYSTEMD = Path("/lib/systemd/systemd")
AWKWARD = [
    "plain",
    "two words",
    "  padded  ",
    'say "hi"',
    "back\\slash",
    "trailing\\",
    "it's",
    "50% off",
    "%n%i",
    "$HOME",
    "${HOME}",
    "$$",
    "a`id`b",
    ";",
    "&& rm -rf /",
    "*",
    "~",
    "--flag=a b",
    "é ünïcødé ✓ 模型",
    "",
]
CONTROL = ["new\nline", "tab\there", "nul\x00", "bell\x07", "del\x7f", "cr\r"]

needs_verify = pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed"
)


def _can_dump() -> bool:
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        return False
    return os.geteuid() == 0 and SYSTEMD.is_file() and shutil.which("setpriv") is not None


needs_dump = pytest.mark.skipif(
    not _can_dump(), reason="needs root, setpriv, the nobody user and /lib/systemd/systemd"
)


def verify(*units: Path) -> subprocess.CompletedProcess[str]:
    """`systemd-analyze verify` on unit files; no --root needed, User= is not resolved."""
    return subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *map(str, units)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SYSTEMD_LOG_COLOR": "0"},
        check=False,
    )


def dump(units: dict[str, str], unit: str) -> dict[str, list[str]]:
    """Settings of `unit` as systemd itself parsed them (`systemd --test --user`, as nobody).

    The manager must not run as root in --test mode and needs a runtime dir of its own; units go
    to a world-readable folder (pytest's tmp_path is private to root) named in SYSTEMD_UNIT_PATH,
    whose trailing ':' keeps the default paths (basic.target must load).
    """
    nobody = pwd.getpwnam("nobody")
    with tempfile.TemporaryDirectory() as units_dir, tempfile.TemporaryDirectory() as runtime:
        os.chmod(units_dir, 0o755)
        os.chown(runtime, nobody.pw_uid, nobody.pw_gid)
        for name, text in units.items():
            path = Path(units_dir, name)
            path.write_text(text)
            path.chmod(0o644)
        done = subprocess.run(
            [
                "setpriv",
                f"--reuid={nobody.pw_uid}",
                f"--regid={nobody.pw_gid}",
                "--clear-groups",
                "env",
                "-i",
                f"SYSTEMD_UNIT_PATH={units_dir}:",
                f"XDG_RUNTIME_DIR={runtime}",
                "HOME=/nonexistent",
                str(SYSTEMD),
                "--test",
                "--user",
                f"--unit={unit}",
                "--log-target=console",
                "--no-pager",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    if done.returncode != 0 and "--test" in done.stderr:
        pytest.skip(f"this systemd has no --test dump: {done.stderr.strip()}")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    settings: dict[str, list[str]] = {}
    inside = False
    for line in done.stdout.splitlines():
        if line.startswith("\t-> Unit "):
            inside = line == f"\t-> Unit {unit}:"
            continue
        if inside and ": " in line:
            key, _, value = line.strip().partition(": ")
            settings.setdefault(key, []).append(value)
    assert settings, f"{unit} not in the dump"
    return settings


def command_words(line: str) -> list[str]:
    """argv from a dump's `Command Line:`: words split on spaces, a word in "..." where \\ escapes
    the next character (systemd escapes only " \\ ` $ there), or bare."""
    words = []
    for m in re.finditer(r'(?:"(?:[^"\\]|\\.)*"|[^ "]+)+', line):
        parts = re.findall(r'"((?:[^"\\]|\\.)*)"|([^ "]+)', m.group())
        words.append("".join(b or re.sub(r"\\(.)", r"\1", q) for q, b in parts))
    return words


def test_filters_are_the_four() -> None:
    expected = {
        "systemd_quote": systemd_quote,
        "systemd_env": systemd_env,
        "systemd_path": systemd_path,
        "shell_quote": shell_quote,
    }
    assert expected == FILTERS


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        ("plain", '"plain"'),
        ("two words", '"two words"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("back\\slash", '"back\\\\slash"'),
        ("50%", '"50%%"'),
        ("$HOME", '"$$HOME"'),
        ("é", '"é"'),
        ("", '""'),
        (8080, '"8080"'),
    ],
)
def test_systemd_quote_exact(value: object, quoted: str) -> None:
    assert systemd_quote(value) == quoted


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        ("s3cr3t", '"s3cr3t"'),
        ('s3cr"et', '"s3cr\\"et"'),
        ("back\\", '"back\\\\"'),
        ("100% $HOME", '"100% $HOME"'),
    ],
)
def test_systemd_env_exact(value: str, quoted: str) -> None:
    """EnvironmentFile values: no specifiers and no `$` expansion there, so only \\ and " escape."""
    assert systemd_env(value) == quoted


def test_systemd_path() -> None:
    assert systemd_path("/etc/gpuprov/llama/main.env") == "/etc/gpuprov/llama/main.env"
    assert systemd_path("/srv/100%/é.env") == "/srv/100%%/é.env"
    for bad in ("relative/path", "/with space", "/tab\tpath", ""):
        with pytest.raises(QuotingError):
            systemd_path(bad)


@pytest.mark.parametrize("value", CONTROL, ids=repr)
@pytest.mark.parametrize("name", sorted(FILTERS))
def test_control_characters_raise(name: str, value: str) -> None:
    with pytest.raises(QuotingError, match="control character"):
        FILTERS[name]("/x" + value)


@needs_dump
def test_systemd_parses_every_awkward_argument_back() -> None:
    """ExecStart written with systemd_quote is the argv systemd stores (with `$` still doubled)."""
    exec_start = " ".join(systemd_quote(v) for v in ["/bin/true", *AWKWARD])
    unit = f"[Service]\nType=oneshot\nExecStart={exec_start}\n"
    settings = dump({"gpuprov-quoting.service": unit}, "gpuprov-quoting.service")
    (line,) = settings["Command Line"]
    assert command_words(line) == ["/bin/true", *(v.replace("$", "$$") for v in AWKWARD)]


@needs_dump
def test_dump_sees_a_wrong_quoting() -> None:
    """The check above can fail: an unescaped % is a specifier and systemd expands it."""
    unit = '[Service]\nType=oneshot\nExecStart=/bin/true "%n"\n'
    (line,) = dump({"gpuprov-q.service": unit}, "gpuprov-q.service")["Command Line"]
    assert command_words(line) == ["/bin/true", "gpuprov-q.service"]


@needs_verify
@pytest.mark.parametrize("name", ["with space", "50% off", "%n", "é ✓ 模型"])
def test_verify_finds_the_quoted_binary(tmp_path: Path, name: str) -> None:
    """systemd resolves a quoted ExecStart binary to exactly the file created here."""
    binary = tmp_path / name
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    args = " ".join(systemd_quote(v) for v in [str(binary), *AWKWARD])
    unit = tmp_path / "gpuprov-quoting.service"
    unit.write_text(f"[Service]\nType=oneshot\nExecStart={args}\n")
    done = verify(unit)
    assert (done.returncode, done.stderr) == (0, "")
    binary.unlink()
    assert "is not executable" in verify(unit).stderr


@pytest.mark.parametrize("value", AWKWARD, ids=repr)
def test_shell_quote_round_trips_through_sh(value: str) -> None:
    script = f'printf "%s\\n" {shell_quote(value)} {shell_quote(value)}'
    done = subprocess.run(
        ["sh", "-c", script], capture_output=True, text=True, timeout=30, check=True
    )
    assert done.stdout == f"{value}\n{value}\n"
