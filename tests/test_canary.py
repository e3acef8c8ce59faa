"""The canary script's main(), against a local HTTP server and stand-in systemctl and journalctl.

Real: roles/canary/files/gpuprov_canary.py (imported by path), requests, real HTTP on 127.0.0.1,
the targets file and EnvironmentFile rendered by the roles' templates, and what systemd 252 wrote
for `systemctl show` and `journalctl` (tests/fixtures/systemd/, provenance in its SOURCES.tsv).
Stand-ins: the HTTP server (http.server answering /health and /completion the way llama-server
does), and systemctl and journalctl (shell scripts that record their arguments and answer with
those recordings). The real llama-server and systemd are covered by the end-to-end tests.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from provision import stack, templates
from tests.conftest import FIXTURES
from tests.support.hostile import hostile_lines, hostile_text

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "roles" / "canary" / "files" / "gpuprov_canary.py"
UNIT = "gpuprov-llama-main.service"
SYSTEMD = FIXTURES / "systemd"
SHOW = (
    "show -p NRestarts,ActiveState,SubState,ExecMainStatus,ExecMainCode,Result,"
    f"ActiveEnterTimestampMonotonic,InactiveEnterTimestampMonotonic {UNIT}"
)
JOURNAL = f"-u {UNIT} -n 10 --no-pager -o cat"
# Both answer with the files the test put beside them; "<name>-hangs" makes one never answer,
# "<name>-fails" makes one fail the way systemd's tools do without a running systemd, and
# "restart-fails" (with "restart-hangs": never answers) does that to `systemctl restart` only,
# "start-fails" to `systemctl start`.
STANDIN = """\
#!/bin/sh
here=$(dirname "$0")
name=$(basename "$0")
printf '%s\\n' "$*" >> "$here/$name.log"
[ -e "$here/$name-hangs" ] && exec sleep 30
if { [ "$name $1" = "systemctl restart" ] && [ -e "$here/restart-fails" ]; } ||
    { [ "$name $1" = "systemctl start" ] && [ -e "$here/start-fails" ]; }; then
    [ -e "$here/restart-hangs" ] && exec sleep 30
    echo "Job for $2 failed because the control process exited with error code." >&2
    echo "See \\"systemctl status $2\\" and \\"journalctl -xeu $2\\" for details." >&2
    exit 1
fi
if [ -e "$here/$name-fails" ]; then
    echo "System has not been booted with systemd as init system (PID 1). Can't operate." >&2
    echo "Failed to connect to bus: Host is down" >&2
    exit 1
fi
case "$name $1" in
    "systemctl show") cat "$here/unit-show" ;;
    journalctl*) cat "$here/journal" 2>/dev/null ;;
esac
exit 0
"""


@pytest.fixture(scope="module")
def canary() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpuprov_canary", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclasses.dataclass
class Stub:
    """What the stand-in llama-server answers (the last answer of a list repeats)."""

    health: list[tuple[int, str]] = dataclasses.field(default_factory=lambda: [(200, "ok")])
    completion: list[tuple[int, str]] = dataclasses.field(
        default_factory=lambda: [(200, json.dumps({"content": "Hello"}))]
    )
    delay: float = 0.0
    seen: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    url: str = ""

    def answer(self, path: str) -> tuple[int, str]:
        answers = self.health if path == "/health" else self.completion
        return answers.pop(0) if len(answers) > 1 else answers[0]


@pytest.fixture
def stub() -> Iterator[Stub]:
    state = Stub()

    class Handler(BaseHTTPRequestHandler):
        def _reply(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode() if length else ""
            state.seen.append(
                {
                    "method": self.command,
                    "path": self.path,
                    "authorization": self.headers.get("Authorization"),
                    "body": json.loads(body) if body else None,
                }
            )
            time.sleep(state.delay)
            status, text = state.answer(self.path)
            data = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _reply

        def log_message(self, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, *args: Any) -> None:
            pass  # a reply to a client that gave up (the timeout case)

    server = Server(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


class Host:
    """The canary's files in tmp_path: targets, EnvironmentFile, state dir, systemctl."""

    def __init__(self, tmp_path: Path, stub: Stub, api_key: str = "") -> None:
        self.root = tmp_path
        port = int(stub.url.rsplit(":", 1)[1])
        data = {
            "llama_server_profiles": [
                {"name": "main", "model": "/m.gguf", "alias": "my model", "port": port}
            ],
            "llama_server_config_dir": str(tmp_path / "etc"),
        }
        profiles = [dataclasses.asdict(p) for p in stack.from_data(data).profiles]
        self.config = tmp_path / "canary.tsv"
        self.config.write_text(
            templates.render("canary", "canary.tsv.j2", profiles=profiles, **stack.variables(data))
        )
        self.env = tmp_path / "etc" / "main.env"
        self.env.parent.mkdir()
        self.env.write_text(
            templates.render(
                "llama_server", "llama-server.env.j2", profile=profiles[0], api_key=api_key
            )
        )
        self.env.chmod(0o600)
        self.state = tmp_path / "state"
        for name in ("systemctl", "journalctl"):
            (tmp_path / name).write_text(STANDIN)
            (tmp_path / name).chmod(0o755)
        self.systemctl = tmp_path / "systemctl"
        self.journalctl = tmp_path / "journalctl"
        self.unit_state("active")

    def unit_state(self, recorded: str) -> None:
        """What `systemctl show` answers: tests/fixtures/systemd/show/<recorded>.txt."""
        (self.root / "unit-show").write_text((SYSTEMD / "show" / f"{recorded}.txt").read_text())

    def journal(self, recorded: str) -> None:
        """What journalctl answers: tests/fixtures/systemd/journal/<recorded>.txt."""
        (self.root / "journal").write_text((SYSTEMD / "journal" / f"{recorded}.txt").read_text())

    @property
    def counter(self) -> Path:
        return self.state / f"{UNIT}.failures"

    def calls(self, tool: str) -> list[str]:
        log = self.root / f"{tool}.log"
        return log.read_text().splitlines() if log.exists() else []

    @property
    def systemctl_calls(self) -> list[str]:
        return self.calls("systemctl")

    def active_since(self, seconds: float) -> None:
        """The recorded active unit, as systemd shows it `seconds` after it became active at
        CLOCK_MONOTONIC 1000 s (the canary's clock then reads 1000 + seconds; see `run`)."""
        show = (SYSTEMD / "show" / "active.txt").read_text()
        (self.root / "unit-show").write_text(show + "ActiveEnterTimestampMonotonic=1000000000\n")
        self.now = 1000.0 + seconds

    now: float | None = None

    def run(self, canary: ModuleType, timeout: float = 5) -> int:
        argv = [
            *("--config", str(self.config), "--state-dir", str(self.state)),
            *("--timeout", str(timeout), "--failures", "2"),
            *("--systemctl", str(self.systemctl), "--journalctl", str(self.journalctl)),
        ]
        now = self.now
        code: int = canary.main(argv) if now is None else canary.main(argv, clock=lambda: now)
        return code


def test_healthy_server(tmp_path: Path, stub: Stub, canary: ModuleType) -> None:
    host = Host(tmp_path, stub)
    assert host.run(canary) == 0
    assert host.systemctl_calls == [SHOW]
    assert host.calls("journalctl") == []
    assert not host.counter.exists()
    assert stub.seen == [
        {"method": "GET", "path": "/health", "authorization": None, "body": None},
        {
            "method": "POST",
            "path": "/completion",
            "authorization": None,
            "body": {"model": "my model", "prompt": "Hi", "n_predict": 1, "cache_prompt": False},
        },
    ]


def test_one_failure_counts_without_restart(
    tmp_path: Path, stub: Stub, canary: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    host = Host(tmp_path, stub)
    stub.completion = [(500, '{"error": "boom"}')]
    assert host.run(canary) == 1
    assert host.counter.read_text() == "1"
    assert host.systemctl_calls == [SHOW]
    assert "failed (HTTP 500), 1 of 2 before a restart" in capsys.readouterr().out


def test_second_failure_in_a_row_restarts(tmp_path: Path, stub: Stub, canary: ModuleType) -> None:
    host = Host(tmp_path, stub)
    stub.completion = [(500, "{}")]
    host.run(canary)
    assert host.run(canary) == 1
    assert host.systemctl_calls == [SHOW, SHOW, f"reset-failed {UNIT}", f"restart {UNIT}"]
    assert not host.counter.exists()


def test_a_success_resets_the_count(tmp_path: Path, stub: Stub, canary: ModuleType) -> None:
    host = Host(tmp_path, stub)
    stub.completion = [(500, "{}"), (200, '{"content": "x"}'), (500, "{}")]
    assert [host.run(canary) for _ in range(3)] == [1, 0, 1]
    assert f"restart {UNIT}" not in host.systemctl_calls
    assert host.counter.read_text() == "1"


def test_reply_that_is_not_a_completion_fails(
    tmp_path: Path, stub: Stub, canary: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    host = Host(tmp_path, stub)
    stub.completion = [(200, "<html>proxy</html>")]
    assert host.run(canary) == 1
    assert "reply is not a completion" in capsys.readouterr().out


def test_server_slower_than_the_timeout_fails(
    tmp_path: Path, stub: Stub, canary: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    host = Host(tmp_path, stub)
    stub.delay = 3
    assert host.run(canary, timeout=0.3) == 1
    assert host.counter.read_text() == "1"
    assert "failed (ReadTimeout)" in capsys.readouterr().out


def test_nothing_listening_fails(
    tmp_path: Path, stub: Stub, canary: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    host = Host(tmp_path, stub)
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{free.getsockname()[1]}"
    host.config.write_text(host.config.read_text().replace(stub.url, closed))
    assert host.run(canary) == 1
    assert "failed (ConnectionError)" in capsys.readouterr().out


def test_model_loading_is_not_a_failure(
    tmp_path: Path, stub: Stub, canary: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    host = Host(tmp_path, stub)
    stub.health = [(503, '{"error": {"code": 503, "message": "Loading model"}}')]
    assert host.run(canary) == 0
    assert not host.counter.exists()
    assert [r["path"] for r in stub.seen] == ["/health"]
    assert f"{UNIT}: loading" in capsys.readouterr().out


# --- units that are not active --------------------------------------------------------------


@pytest.mark.parametrize("recorded", ["stopped", "stopped-after-a-crash-loop", "not-found"])
def test_unit_a_person_stopped_is_skipped(
    tmp_path: Path,
    stub: Stub,
    canary: ModuleType,
    capsys: pytest.CaptureFixture[str],
    recorded: str,
) -> None:
    host = Host(tmp_path, stub)
    host.unit_state(recorded)
    assert host.run(canary) == 0
    assert stub.seen == []
    assert host.systemctl_calls == [SHOW]
    assert host.calls("journalctl") == []
    assert capsys.readouterr().out == f"{UNIT}: skipped (stopped)\n"


def test_unit_starting_for_the_first_time_is_skipped(
    tmp_path: Path, stub: Stub, canary: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    host = Host(tmp_path, stub)
    host.unit_state("starting")
    assert host.run(canary) == 0
    assert stub.seen == []
    assert capsys.readouterr().out == f"{UNIT}: skipped, unit is activating (start-pre)\n"


def test_crash_looping_unit_is_failing_with_its_state_and_journal(
    tmp_path: Path, stub: Stub, canary: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    """The unit systemd restarts over and over (a flag the binary rejects): every run says so,
    with the journal's reason, and none restarts it."""
    host = Host(tmp_path, stub)
    host.unit_state("crash-loop")
    host.journal("crash-loop")
    assert [host.run(canary) for _ in range(3)] == [1, 1, 1]
    assert stub.seen == []
    assert host.systemctl_calls == [SHOW] * 3
    assert host.calls("journalctl") == [JOURNAL] * 3
    out = capsys.readouterr().out.splitlines()
    head = (
        f"{UNIT}: FAILING: activating (auto-restart), 39 automatic restarts, main process exited"
        " with status 1, result exit-code; not restarted by the canary"
    )
    journal = (SYSTEMD / "journal" / "crash-loop.txt").read_text().splitlines()
    assert out == [head, *(f"{UNIT}: journal: {line}" for line in journal)] * 3
    assert f"{UNIT}: journal: error: invalid argument: --bogus-flag" in out


@pytest.mark.parametrize(
    ("recorded", "described"),
    [
        (
            "killed-in-a-loop",
            "activating (auto-restart), 39 automatic restarts,"
            " main process killed by signal 9 (SIGKILL), result signal",
        ),
        (
            "failed",
            "failed (failed), 0 automatic restarts, main process exited with status 1,"
            " result exit-code",
        ),
        (
            "failed-start-limit",
            "failed (failed), 5 automatic restarts, main process exited with status 1,"
            " result exit-code",
        ),
        (
            "starting-after-a-timeout",
            "activating (start-pre), 1 automatic restart, result success",
        ),
    ],
)
def test_unit_systemd_restarted_or_gave_up_on_is_failing(
    tmp_path: Path,
    stub: Stub,
    canary: ModuleType,
    capsys: pytest.CaptureFixture[str],
    recorded: str,
    described: str,
) -> None:
    host = Host(tmp_path, stub)
    host.unit_state(recorded)
    host.journal(recorded)
    assert host.run(canary) == 1
    assert stub.seen == []
    assert host.systemctl_calls == [SHOW]
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{UNIT}: FAILING: {described}; not restarted by the canary"
    journal = (SYSTEMD / "journal" / f"{recorded}.txt").read_text().splitlines()
    assert out[1 : 1 + len(journal)] == [f"{UNIT}: journal: {line}" for line in journal]
    gave_up = [f"{UNIT}: systemd gave up on it; to be started again after 300s down"]
    assert out[1 + len(journal) :] == (gave_up if recorded.startswith("failed") else [])


def given_up_on(host: Host, canary: ModuleType, seconds: float) -> None:
    """The unit systemd gave up on (5 starts within its start limit), `seconds` after it failed."""
    host.unit_state("failed-start-limit-burst")
    host.journal("failed-start-limit-burst")
    down = canary.parse_show((host.root / "unit-show").read_text()).down_since
    host.now = down / 1e6 + seconds


def test_unit_systemd_gave_up_on_waits_out_its_cool_down(
    tmp_path: Path, stub: Stub, canary: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    host = Host(tmp_path, stub)
    given_up_on(host, canary, 120)
    assert host.run(canary) == 1
    assert host.systemctl_calls == [SHOW]
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        f"{UNIT}: FAILING: failed (failed), 5 automatic restarts, main process exited with"
        " status 1, result exit-code; not restarted by the canary"
    )
    again = "to be started again after 300s down (120s so far)"
    assert out[-1] == f"{UNIT}: systemd gave up on it; {again}"


@pytest.mark.parametrize(
    ("start_fails", "said"),
    [
        (False, f"{UNIT}: systemd gave up on it 600s ago: starting {UNIT} again"),
        (
            True,
            f"{UNIT}: start not confirmed (systemctl exited 1: Job for {UNIT} failed because the"
            f' control process exited with error code. See "systemctl status {UNIT}" and'
            f' "journalctl -xeu {UNIT}" for details.)',
        ),
    ],
)
def test_unit_systemd_gave_up_on_is_started_after_its_cool_down(
    tmp_path: Path,
    stub: Stub,
    canary: ModuleType,
    capsys: pytest.CaptureFixture[str],
    start_fails: bool,
    said: str,
) -> None:
    """reset-failed first: systemctl refuses to start a unit past its start limit until then."""
    host = Host(tmp_path, stub)
    given_up_on(host, canary, 600)
    if start_fails:
        (tmp_path / "start-fails").touch()
    assert host.run(canary) == 1
    assert host.systemctl_calls == [SHOW, f"reset-failed {UNIT}", f"start {UNIT}"]
    assert capsys.readouterr().out.splitlines()[-1] == said


def test_failing_unit_ends_a_run_of_failures(
    tmp_path: Path, stub: Stub, canary: ModuleType
) -> None:
    """A failed probe, then systemd restarting the unit, then a failed probe: not two failures
    of one server in a row, so no restart."""
    host = Host(tmp_path, stub)
    stub.completion = [(500, "{}")]
    assert host.run(canary) == 1
    assert host.counter.read_text() == "1"
    host.unit_state("crash-loop")
    assert host.run(canary) == 1
    assert not host.counter.exists()
    host.unit_state("active")
    assert host.run(canary) == 1
    assert host.counter.read_text() == "1"
    assert f"restart {UNIT}" not in host.systemctl_calls


def test_no_journal_lines_still_says_failing(
    tmp_path: Path, stub: Stub, canary: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    host = Host(tmp_path, stub)
    host.unit_state("crash-loop")
    assert host.run(canary) == 1
    assert capsys.readouterr().out.splitlines()[1:] == [f"{UNIT}: journal: (no lines)"]


def test_journalctl_that_fails_is_named(
    tmp_path: Path, stub: Stub, canary: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    host = Host(tmp_path, stub)
    host.unit_state("crash-loop")
    (tmp_path / "journalctl-fails").touch()
    assert host.run(canary) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[1:] == [
        f"{UNIT}: journal: (no lines: journalctl exited 1: System has not been booted with"
        " systemd as init system (PID 1). Can't operate. Failed to connect to bus: Host is down)"
    ]


def test_journal_lines_never_show_the_api_key(
    tmp_path: Path, stub: Stub, canary: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    host = Host(tmp_path, stub, api_key="k3y-s3cret")
    host.unit_state("crash-loop")
    (tmp_path / "journal").write_text("error: invalid argument: --api-key=k3y-s3cret\n")
    assert host.run(canary) == 1
    out = capsys.readouterr().out
    assert "k3y-s3cret" not in out
    assert f"{UNIT}: journal: error: invalid argument: --api-key=<secret>" in out


@pytest.mark.parametrize(
    ("setup", "why"),
    [
        ("fails", "systemctl exited 1: System has not been booted with systemd as init system"),
        ("missing", "systemctl: No such file or directory"),
        ("garbage", "systemctl show gave no ActiveState"),
    ],
)
def test_unit_state_not_read_is_a_failure(
    tmp_path: Path,
    stub: Stub,
    canary: ModuleType,
    capsys: pytest.CaptureFixture[str],
    setup: str,
    why: str,
) -> None:
    host = Host(tmp_path, stub)
    if setup == "fails":
        (tmp_path / "systemctl-fails").touch()
    elif setup == "missing":
        host.systemctl.unlink()
    else:
        (tmp_path / "unit-show").write_text("Failed to get properties: Access denied\n")
    assert host.run(canary) == 1
    assert stub.seen == []
    assert capsys.readouterr().out.startswith(f"{UNIT}: FAILING: state unknown ({why}")


def test_systemctl_that_never_answers_is_given_up_on(
    tmp_path: Path,
    stub: Stub,
    canary: ModuleType,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(canary, "SHOW_TIMEOUT", 0.2)
    host = Host(tmp_path, stub)
    (tmp_path / "systemctl-hangs").touch()
    assert host.run(canary) == 1
    out = capsys.readouterr().out
    assert out == f"{UNIT}: FAILING: state unknown (systemctl did not answer within 0.2s)\n"


@pytest.mark.parametrize(
    ("how", "why"),
    [
        (
            "fails",
            f"systemctl exited 1: Job for {UNIT} failed because the control process exited"
            f' with error code. See "systemctl status {UNIT}" and "journalctl -xeu {UNIT}"'
            " for details.",
        ),
        ("hangs", "systemctl did not answer within 0.2s"),
    ],
)
def test_restart_not_confirmed_is_logged(
    tmp_path: Path,
    stub: Stub,
    canary: ModuleType,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    how: str,
    why: str,
) -> None:
    monkeypatch.setattr(canary, "RESTART_TIMEOUT", 0.2)
    host = Host(tmp_path, stub)
    stub.completion = [(500, "{}")]
    host.run(canary)
    (tmp_path / "restart-fails").touch()
    if how == "hangs":
        (tmp_path / "restart-hangs").touch()
    assert host.run(canary) == 1
    assert host.systemctl_calls[-1] == f"restart {UNIT}"
    out = capsys.readouterr().out.splitlines()
    assert out[-2:] == [
        f"{UNIT}: failed (HTTP 500) 2 times in a row: restarting {UNIT}",
        f"{UNIT}: restart not confirmed ({why})",
    ]


def test_every_command_the_canary_runs_has_a_timeout() -> None:
    """A systemctl or journalctl that hangs must not hang the canary's oneshot unit."""
    tree = ast.parse(SCRIPT.read_text())
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "subprocess"
    ]
    assert calls
    assert all(any(k.arg == "timeout" for k in call.keywords) for call in calls)


# --- `systemctl show`, parsed -------------------------------------------------------------------

VERDICTS = {
    "active": "active",
    "crash-loop": "failing",
    "failed": "failing",
    "failed-start-limit": "failing",
    "failed-start-limit-burst": "failing",
    "killed-in-a-loop": "failing",
    "not-found": "stopped",
    "starting": "busy",
    "starting-after-a-timeout": "failing",
    "stopped": "stopped",
    "stopped-after-a-crash-loop": "stopped",
    "verify-active": "active",
    "verify-auto-restart": "failing",
}


def test_every_recorded_state_has_a_verdict(canary: ModuleType) -> None:
    recorded = {p.stem: p.read_text() for p in (SYSTEMD / "show").glob("*.txt")}
    assert set(recorded) == set(VERDICTS)
    assert {name: canary.parse_show(text).verdict for name, text in recorded.items()} == VERDICTS


def test_every_recording_has_its_source() -> None:
    listed = (SYSTEMD / "SOURCES.tsv").read_text().splitlines()[1:]
    files = sorted(str(p.relative_to(SYSTEMD)) for p in SYSTEMD.glob("*/*.txt"))
    assert sorted(line.split("\t")[0] for line in listed) == files
    assert all(len(line.split("\t")) == 3 and all(line.split("\t")) for line in listed)


def test_show_output_in_any_order_with_the_other_properties(canary: ModuleType) -> None:
    text = "SubState=auto-restart\nId=x.service\nActiveState=activating\nNRestarts=3\n"
    state = canary.parse_show(text)
    assert (state.active, state.sub, state.restarts, state.status) == (
        "activating",
        "auto-restart",
        3,
        None,
    )
    assert state.verdict == "failing"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\x00\xff=\n",
        "=\n==\nActiveState\n",
        "NRestarts=-1\nExecMainStatus=1e9\nExecMainCode=99999999999999999999\n",
        "ActiveState=\nResult=success\n",
        "x" * 100_000,
    ],
)
def test_show_parser_never_raises(canary: ModuleType, text: str) -> None:
    state = canary.parse_show(text)
    assert state.verdict == "unknown"
    assert (state.restarts, state.status, state.code) == (None, None, None)


@pytest.mark.parametrize(
    ("fields", "last"),
    [
        ({"status": 1, "code": 1}, "exited with status 1"),
        ({"status": 9, "code": 2}, "killed by signal 9 (SIGKILL)"),
        ({"status": 11, "code": 3}, "dumped core on signal 11 (SIGSEGV)"),
        ({"status": 6, "result": "core-dump"}, "dumped core on signal 6 (SIGABRT)"),
        ({"status": 15, "result": "signal"}, "killed by signal 15 (SIGTERM)"),
        ({"status": 200, "code": 2}, "killed by signal 200"),
        ({"status": 0, "code": 0}, ""),
        ({"status": 0, "code": 1}, "exited with status 0"),
        ({}, ""),
    ],
)
def test_last_exit(canary: ModuleType, fields: dict[str, Any], last: str) -> None:
    assert canary.UnitState(**fields).last_exit() == last


def test_api_key_from_a_handwritten_env_file(
    tmp_path: Path, stub: Stub, canary: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    host = Host(tmp_path, stub)
    host.env.write_text('# 0600\nLLAMA_API_KEY="s3cr\\"et"\n')
    assert host.run(canary) == 0
    assert {r["authorization"] for r in stub.seen} == {'Bearer s3cr"et'}
    assert "s3cr" not in capsys.readouterr().out


@pytest.mark.parametrize(
    "key", ['s3cr"et', "back\\slash\\", '\\"', "dollar $HOME `id` 100%", " spaced  "]
)
def test_api_key_from_the_rendered_env_file(
    tmp_path: Path, stub: Stub, canary: ModuleType, capsys: pytest.CaptureFixture[str], key: str
) -> None:
    """What llama-server.env.j2 writes (systemd_env) is the key the canary sends."""
    host = Host(tmp_path, stub, api_key=key)
    stub.completion = [(500, "{}")]  # a failure is logged too: still no key
    assert host.run(canary) == 1
    assert {r["authorization"] for r in stub.seen} == {f"Bearer {key}"}
    out = capsys.readouterr().out
    assert key.strip() not in out


def test_non_latin1_key_does_not_crash(tmp_path: Path, stub: Stub, canary: ModuleType) -> None:
    host = Host(tmp_path, stub, api_key="clé✓")
    assert host.run(canary) in (0, 1)


OPENAI_OK = json.dumps({"choices": [{"index": 0, "text": "Hi"}]})
REPLICA_UNIT = "gpuprov-vllm-qwen-1.service"


def vllm_host(tmp_path: Path, stub: Stub, key: str = "k3y") -> Host:
    """A replica and the balancer in front of it, both served by the stub, per canary.tsv.j2."""
    host = Host(tmp_path, stub)
    port = int(stub.url.rsplit(":", 1)[1])
    data = {
        "vllm_config_dir": str(tmp_path / "etc"),
        "vllm_replicas": [{"name": "qwen-1", "model": "Org/Model", "port": port, "gpus": [0]}],
        "nginx_lb_enabled": True,
        "nginx_lb_listen": port + 1 if port < 65535 else port - 1,
    }
    s = stack.from_data(data)
    replicas = [dataclasses.asdict(r) for r in s.vllm.replicas]
    text = templates.render(
        "canary", "canary.tsv.j2", profiles=[], replicas=replicas, **stack.variables(data)
    )
    # the balancer's line, pointed at the stub: nginx would forward there
    host.config.write_text(text.replace(f":{data['nginx_lb_listen']}\t", f":{port}\t"))
    env = templates.render("vllm", "vllm.env.j2", replica=replicas[0], hf_token="hf_x", api_key=key)
    (tmp_path / "etc" / "qwen-1.env").write_text(env)
    return host


def test_replica_and_balancer_targets_are_rendered(tmp_path: Path, stub: Stub) -> None:
    host = vllm_host(tmp_path, stub)
    lines = [line.split("\t") for line in host.config.read_text().splitlines()[1:]]
    assert [(line[0], line[2], line[3].rsplit("/", 1)[1], line[4]) for line in lines] == [
        (REPLICA_UNIT, "Org/Model", "qwen-1.env", "openai"),
        ("nginx.service", "Org/Model", "qwen-1.env", "balancer"),
    ]


def test_replica_and_balancer_answer(tmp_path: Path, stub: Stub, canary: ModuleType) -> None:
    host = vllm_host(tmp_path, stub)
    stub.completion = [(200, OPENAI_OK)]
    assert host.run(canary) == 0
    posts = [r for r in stub.seen if r["method"] == "POST"]
    assert [r["path"] for r in posts] == ["/v1/completions", "/v1/completions"]
    assert posts[0]["body"] == {"model": "Org/Model", "prompt": "Hi", "max_tokens": 1}
    assert {r["authorization"] for r in stub.seen} == {"Bearer k3y"}


def test_failing_replica_is_restarted_but_the_balancer_never(
    tmp_path: Path, stub: Stub, canary: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    host = vllm_host(tmp_path, stub)
    stub.completion = [(500, "{}")]
    host.run(canary)
    assert host.run(canary) == 1
    calls = host.systemctl_calls
    assert f"restart {REPLICA_UNIT}" in calls
    assert "restart nginx.service" not in calls
    out = capsys.readouterr().out
    assert "nginx.service: failed through the balancer" in out and "not restarted" in out


def test_openai_reply_without_choices_fails(
    tmp_path: Path, stub: Stub, canary: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    host = vllm_host(tmp_path, stub)
    stub.completion = [(200, json.dumps({"choices": []}))]
    assert host.run(canary) == 1
    assert "reply is not a completion" in capsys.readouterr().out


def test_failing_replica_and_balancer_units_are_reported_never_restarted(
    tmp_path: Path, stub: Stub, canary: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    host = vllm_host(tmp_path, stub)
    host.unit_state("crash-loop")
    assert [host.run(canary) for _ in range(2)] == [1, 1]
    assert stub.seen == []
    assert not any(call.startswith("restart") for call in host.systemctl_calls)
    out = capsys.readouterr().out
    for unit in (REPLICA_UNIT, "nginx.service"):
        assert f"{unit}: FAILING: activating (auto-restart)" in out
        assert f"{unit}: journal: (no lines)" in out


# --- start-up, deadlines, damaged state -------------------------------------------------------


def closed_port() -> str:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{free.getsockname()[1]}"


def test_targets_carry_each_servers_start_up_bound(tmp_path: Path, stub: Stub) -> None:
    host = vllm_host(tmp_path, stub)
    lines = [line.split("\t") for line in host.config.read_text().splitlines()[1:]]
    assert [(line[0], line[5]) for line in lines] == [
        (REPLICA_UNIT, "900"),
        ("nginx.service", "900"),
    ]
    (tmp_path / "llama").mkdir()
    llama = Host(tmp_path / "llama", stub)
    assert llama.config.read_text().splitlines()[1].split("\t")[5] == "300"


def test_a_replica_not_answering_during_its_start_up_is_loading(
    tmp_path: Path, stub: Stub, canary: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    """vLLM refuses connections until its model is loaded (minutes): not a failure, no restart."""
    host = vllm_host(tmp_path, stub)
    host.config.write_text(host.config.read_text().replace(stub.url, closed_port()))
    host.active_since(120)
    for _ in range(3):
        assert host.run(canary) == 0
    assert not any(c.startswith("restart") for c in host.systemctl_calls)
    out = capsys.readouterr().out
    assert f"{REPLICA_UNIT}: loading: ConnectionError, 120s into its 900s start-up" in out


def test_a_replica_not_answering_past_its_start_up_is_restarted(
    tmp_path: Path, stub: Stub, canary: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    host = vllm_host(tmp_path, stub)
    host.config.write_text(host.config.read_text().replace(stub.url, closed_port()))
    host.active_since(901)
    assert host.run(canary) == 1
    assert host.run(canary) == 1
    assert f"restart {REPLICA_UNIT}" in host.systemctl_calls
    assert "restart nginx.service" not in host.systemctl_calls


def test_llama_loading_past_its_start_up_is_a_failure(
    tmp_path: Path, stub: Stub, canary: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    """503 "Loading model" within 300 s is loading; 5 minutes later the server is hung."""
    host = Host(tmp_path, stub)
    stub.health = [(503, '{"error": {"code": 503, "message": "Loading model"}}')]
    host.active_since(299)
    assert host.run(canary) == 0
    assert f"{UNIT}: loading: model still loading, 299s into its 300s start-up" in (
        capsys.readouterr().out
    )
    host.active_since(301)
    assert host.run(canary) == 1
    assert host.counter.read_text() == "1"
    assert "failed (model still loading after its 300s start-up)" in capsys.readouterr().out


def test_a_server_that_answers_with_an_error_is_failing_even_in_its_start_up(
    tmp_path: Path, stub: Stub, canary: ModuleType
) -> None:
    """Only a refused connection or a server saying it loads is loading; one that answers a
    completion with an error (or hangs: tests/e2e SIGSTOPs one) is failing from the start."""
    host = Host(tmp_path, stub)
    stub.completion = [(500, "{}"), (500, "{}")]
    host.active_since(10)
    assert host.run(canary) == 1
    assert host.counter.read_text() == "1"
    assert canary.loading("fail", "ReadTimeout", 10, 300) == ""
    assert canary.loading("fail", "Deadline", 10, 300) == ""
    assert canary.loading("fail", "ConnectionError", 10, 300).startswith("ConnectionError, 10s")


@pytest.mark.parametrize("text", [b"", b"x", b"\xff\xfe", b"-3", b"1e9", b"\xd9\xa3", b"99999999"])
def test_a_damaged_failure_counter_counts_as_none(
    tmp_path: Path, stub: Stub, canary: ModuleType, text: bytes
) -> None:
    """A counter file cut short or overwritten crashed every later run."""
    host = Host(tmp_path, stub)
    host.state.mkdir()
    host.counter.write_bytes(text)
    stub.completion = [(500, "{}")]
    assert host.run(canary) == 1
    assert host.counter.read_text() == "1"


def test_a_server_sending_a_byte_at_a_time_meets_the_deadline(
    tmp_path: Path, stub: Stub, canary: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each byte inside the per-read timeout, the reply never whole: held a probe for minutes."""
    stop = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))

    def trickle() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 1000:
                    if stop.wait(0.1):
                        break
                    try:
                        conn.sendall(bytes([byte]))
                    except OSError:
                        break

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        host = Host(tmp_path, stub)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        host.config.write_text(host.config.read_text().replace(stub.url, url))
        assert host.run(canary, timeout=0.5) == 1
        assert "failed (Deadline)" in capsys.readouterr().out
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def test_unreadable_config_lines_are_skipped(canary: ModuleType) -> None:
    text = "# head\nonly\ttwo\nu\thttp://x\tm\t/e\topenai\tnot-a-number\nv\thttp://y\tm\t/e\n"
    assert canary.targets(text) == [
        ("u", "http://x", "m", "/e", "openai", 0.0, "resident"),
        ("v", "http://y", "m", "/e", "llama", 0.0, "resident"),
    ]


@given(text=hostile_lines(["NRestarts=3", "ActiveState=active", "ActiveEnterTimestampMonotonic=5"]))
def test_property_show_parser_never_raises(canary: ModuleType, text: str) -> None:
    state = canary.parse_show(text)
    assert state.since is None or 0 <= state.since < 10**19


@given(text=hostile_lines(["u\thttp://x\tm\t/e\topenai\t900", "v\thttp://y\tm\t/e\tllama"]))
def test_property_targets_never_raise(canary: ModuleType, text: str) -> None:
    for *_, startup, residency in canary.targets(text):
        assert startup >= 0 and residency


@given(data=st.binary(max_size=40) | hostile_text().map(lambda t: t.encode("utf-8", "replace")))
def test_property_a_counter_file_is_read_or_counts_as_none(
    canary: ModuleType, tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    counter = tmp_path_factory.mktemp("state") / "u.failures"
    counter.write_bytes(data)
    assert 0 <= canary.read_count(counter) < 100000
