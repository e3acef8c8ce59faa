"""`gpuprov apply` end to end on a real systemd test host, checked testinfra-style over SSH.

Real: the test host (systemd as PID 1 in a podman container, its own network namespace, SSH),
pyinfra, the llama.cpp source vendored in the llama-cpp-python sdist built CPU-only on the host,
llama-server serving a tiny GGUF model written with the gguf package, systemd restarting it, the
canary timer. Nothing is stubbed. The tests run in order and share one host and one build.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from checks.reporting import schema
from checks.services import llama_server_help
from provision import lock
from provision.testhost import hosts
from tests.e2e.hosts import (
    GPUPROV,
    ROOT,
    TINY_MODEL,
    Host,
    Inventory,
    apply,
    gpuprov,
    host_report,
    llama_host,
    lock_held_by,
    vendored_source,
    wait_for,
)

MODEL = TINY_MODEL
PREFIX = "/opt/gpuprov/llama.cpp"

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def host(testhost_factory: Callable[[str], hosts.TestHost], tmp_path_factory: Any) -> Host:
    return llama_host(testhost_factory, "e2e-llama", tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="module")
def inventory(host: Host, sdist: Path, tmp_path_factory: Any) -> Inventory:
    base = {
        **vendored_source(sdist),
        "llama_server_profiles": [
            {"name": "alpha", "model": MODEL, "port": 8081, "ctx_size": 256},
            {"name": "beta", "model": MODEL, "port": 8082, "ctx_size": 256, "alias": "b"},
        ],
        "canary_interval": 6,
        "canary_timeout": 3,
        "canary_cool_down": 20,
    }
    return Inventory(tmp_path_factory.mktemp("inv") / "inventory.py", host.record, base)


def test_first_apply_builds_and_serves(host: Host, inventory: Inventory) -> None:
    fresh = not host.ok(f"test -e {PREFIX}/current")  # a kept host may be converged already
    code, report, stderr = apply(inventory)
    assert code == 0, stderr
    result = host_report(report, inventory)
    names = [op["name"] for op in result["operations"] if op["status"] == "changed"]
    if fresh:
        assert any(n.startswith("Build llama-server") for n in names), names
        assert "llama-build" in stderr  # the build's progress is shown
    for unit in ("gpuprov-llama-alpha.service", "gpuprov-llama-beta.service"):
        assert host.active(unit)
        assert host.ok(f"systemctl is-enabled {unit}")
        host.run(f"systemd-analyze verify /etc/systemd/system/{unit}")
    assert host.run("stat -c %a /etc/gpuprov/llama/alpha.env").strip() == "600"
    assert host.run(f"readlink {PREFIX}/current").startswith("builds/")
    assert_verified(result)


def assert_verified(result: dict[str, Any]) -> None:
    """apply's own post-apply check: every unit up, every server answered a real completion."""
    check = result["verification"]
    assert check["ok"] and check["error"] is None, check
    units = {u["unit"]: u for u in check["units"]}
    assert set(units) == {
        "gpuprov-llama-alpha.service",
        "gpuprov-llama-beta.service",
        "gpuprov-canary.timer",
    }
    for name in ("alpha", "beta"):
        assert "ok: 1 token in" in units[f"gpuprov-llama-{name}.service"]["detail"], units


def test_servers_answer(host: Host) -> None:
    for port in (8081, 8082):
        wait_for(f"/health on {port}", lambda p=port: '"ok"' in host.get(p, "/health"), 60)
        reply = host.complete(port)
        assert reply["tokens_predicted"] >= 1
        assert isinstance(reply["content"], str)


def test_canary_logs_its_checks(host: Host) -> None:
    def logged() -> bool:
        log = host.run("journalctl -q -u gpuprov-canary.service --no-pager", check=False)
        return "gpuprov-llama-alpha.service: ok" in log and "gpuprov-llama-beta.service: ok" in log

    wait_for("a canary check in the journal", logged, 40, step=2)
    assert host.active("gpuprov-canary.timer")


def test_second_apply_changes_nothing(host: Host, inventory: Inventory) -> None:
    before = host.run(f"stat -c %Y {PREFIX}/current/bin/llama-server")
    pids = [host.main_pid(f"gpuprov-llama-{n}.service") for n in ("alpha", "beta")]
    code, report, stderr = apply(inventory)
    assert code == 0, stderr
    result = host_report(report, inventory)
    assert result["changed"] == 0, [
        op for op in result["operations"] if op["status"] != "unchanged"
    ]
    assert not any(op["name"].startswith("Build") for op in result["operations"])
    assert host.run(f"stat -c %Y {PREFIX}/current/bin/llama-server") == before
    assert [host.main_pid(f"gpuprov-llama-{n}.service") for n in ("alpha", "beta")] == pids
    assert_verified(result)


def _status(inventory: Inventory) -> tuple[int, dict[str, Any], str]:
    done = gpuprov("status", str(inventory.write()), "--json", timeout=300)
    report = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
    return done.returncode, report, done.stderr


def test_status_shows_every_service_as_planned(host: Host, inventory: Inventory) -> None:
    code, report, stderr = _status(inventory)
    assert code == 0, (stderr, report)
    jsonschema.validate(report, schema.committed("status"))
    [found] = report["hosts"]
    services = {s["service"]: s for s in found["services"]}
    assert set(services) == {"alpha", "beta", "canary"}
    current = host.run(f"readlink {PREFIX}/current").strip().rsplit("/", 1)[-1]
    assert found["build_current"] == found["build_planned"] == current
    for name in ("alpha", "beta"):
        s = services[name]
        assert s["state"] == "active (running)" and s["drift"] == [], s
        assert s["runs"] == current and s["since"]
        assert s["canary"] and " ok: " in f" {s['canary']}", s  # the canary's last word
        assert s["restarts_last_hour"] is not None
    assert services["canary"]["state"] == "active (waiting)"
    assert found["stale"] == []


def test_status_names_an_edited_unit_and_a_stopped_one(host: Host, inventory: Inventory) -> None:
    unit = "/etc/systemd/system/gpuprov-llama-beta.service"
    host.run(f"echo '# edited by hand' >> {unit} && systemctl daemon-reload")
    host.run("systemctl stop gpuprov-llama-alpha.service")
    code, report, _ = _status(inventory)
    assert code == 1
    services = {s["service"]: s for s in report["hosts"][0]["services"]}
    assert any(d.startswith("not running (inactive") for d in services["alpha"]["drift"])
    assert any("gpuprov-llama-beta.service" in d for d in services["beta"]["drift"])
    text = gpuprov("status", str(inventory.write()), timeout=300).stdout
    assert "drift alpha: not running" in text
    code, _, stderr = apply(inventory)  # apply puts both back
    assert code == 0, stderr
    assert _status(inventory)[0] == 0


def test_prune_builds_keeps_the_newest_and_the_one_in_use(host: Host, inventory: Inventory) -> None:
    """Two older builds (dated back, so `current` is the newest) go with --prune-builds 1;
    plan shows their removal first, and apply without the option keeps every build."""
    current = host.run(f"readlink {PREFIX}/current").strip().rsplit("/", 1)[-1]
    for name, age in (("b0001-old", "2 days ago"), ("b0002-older", "3 days ago")):
        host.run(f"mkdir -p {PREFIX}/builds/{name}/bin && touch -d '{age}' {PREFIX}/builds/{name}")
    assert apply(inventory)[0] == 0
    assert host.ok(f"test -d {PREFIX}/builds/b0001-old")  # nothing pruned unless asked
    shown = gpuprov("plan", str(inventory.write()), "--prune-builds", "1")
    assert "Remove the old build b0001-old" in shown.stdout + shown.stderr
    assert host.ok(f"test -d {PREFIX}/builds/b0001-old")  # plan changed nothing
    code, _, stderr = apply(inventory, "--prune-builds", "1")
    assert code == 0, stderr
    kept = host.run(f"ls -1 {PREFIX}/builds").split()
    assert kept == [current], kept
    assert host.run(f"readlink {PREFIX}/current").strip().endswith(current)
    assert apply(inventory, "--prune-builds", "1")[1]["hosts"][inventory.name]["changed"] == 0


def test_kill_9_is_restarted_by_systemd(host: Host) -> None:
    unit = "gpuprov-llama-alpha.service"
    pid = host.main_pid(unit)
    host.run(f"kill -9 {pid}")

    def back() -> bool:
        return host.active(unit) and host.main_pid(unit) not in (0, pid)

    took = wait_for("the killed server back", back, 15)
    print(f"restarted after kill -9 in {took:.1f}s")
    wait_for("/health after restart", lambda: '"ok"' in host.get(8081, "/health"), 30)


def test_hung_server_is_restarted_by_the_canary(host: Host) -> None:
    unit = "gpuprov-llama-beta.service"
    pid = host.main_pid(unit)
    host.run(f"kill -STOP {pid}")
    try:
        wait_for("the canary restarting the hung server", lambda: host.main_pid(unit) != pid, 60, 1)
    finally:
        host.run(f"kill -CONT {pid}", check=False)
    log = host.run("journalctl -q -u gpuprov-canary.service --no-pager")
    assert f"restarting {unit}" in log
    wait_for("/health after the canary's restart", lambda: '"ok"' in host.get(8082, "/health"), 30)


def test_changing_one_profile_restarts_only_that_unit(host: Host, inventory: Inventory) -> None:
    alpha, beta = (host.main_pid(f"gpuprov-llama-{n}.service") for n in ("alpha", "beta"))
    profiles = [dict(p) for p in inventory.data["llama_server_profiles"]]
    profiles[1]["ctx_size"] = 384
    inventory.data["llama_server_profiles"] = profiles
    code, _, stderr = apply(inventory)
    assert code == 0, stderr
    assert host.main_pid("gpuprov-llama-alpha.service") == alpha
    assert host.main_pid("gpuprov-llama-beta.service") != beta
    assert "--ctx-size 384" in host.run("ps -o args= -C llama-server")


def test_concurrent_applies_are_serialised(host: Host, inventory: Inventory) -> None:
    with lock_held_by(host, "other-apply"):
        done = gpuprov("apply", str(inventory.write()), "-y", "--lock-timeout", "3")
        assert done.returncode == 1
        assert "other-apply" in done.stdout + done.stderr
        waiting = subprocess.Popen(
            [*GPUPROV, "apply", str(inventory.path), "-y", "--json"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(4)
        assert waiting.poll() is None  # still waiting for the lock
    _out, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, err
    assert "waiting for the apply lock held by other-apply" in err
    assert host.ok(f"flock -n {lock.PATH} true")  # released


def test_failed_build_keeps_the_old_binary_serving(host: Host, inventory: Inventory) -> None:
    host.run("rm -rf /srv/llama.git && git init -q --bare /srv/llama.git")
    current = host.run(f"readlink {PREFIX}/current")
    pid = host.main_pid("gpuprov-llama-alpha.service")
    code, report, _stderr = apply(
        inventory,
        llama_cpp_tarball="",
        llama_cpp_git_url="file:///srv/llama.git",
        llama_cpp_ref="does-not-exist",
    )
    assert code == 1
    ops = host_report(report, inventory)["operations"]
    assert any(op["status"] == "failed" and op["name"].startswith("Build") for op in ops), ops
    assert host.run(f"readlink {PREFIX}/current") == current
    assert host.main_pid("gpuprov-llama-alpha.service") == pid
    assert '"ok"' in host.get(8081, "/health")
    assert not host.ok(f"ls -d {PREFIX}/builds/.*.partial {PREFIX}/work/* 2>/dev/null | grep -q .")


def named(host: Host, build: str) -> str:
    """How messages name a build: the version its `--version` prints, else its path."""
    binary = f"{PREFIX}/{build}/bin/llama-server"
    version = llama_server_help.parse_version(host.run(f"{binary} --version 2>&1", check=False))
    return version.label() or f"at {binary}"


def with_extra_args(inventory: Inventory, extra: list[str]) -> list[dict[str, Any]]:
    """The profiles with alpha's extra_args set to `extra`."""
    profiles = [dict(p) for p in inventory.data["llama_server_profiles"]]
    profiles[0]["extra_args"] = extra
    return profiles


def test_plan_names_a_flag_the_built_llama_cpp_refuses(host: Host, inventory: Inventory) -> None:
    """The vendored llama.cpp has --load-mode and no --mlock. The planned build is the one
    built and current, so the gate reads its own --help: an error, and apply leaves the host."""
    current = host.run(f"readlink {PREFIX}/current").strip()
    unit = host.run("cat /etc/systemd/system/gpuprov-llama-alpha.service")
    pids = [host.main_pid(f"gpuprov-llama-{n}.service") for n in ("alpha", "beta")]
    profiles = with_extra_args(inventory, ["--mlock"])
    done = gpuprov("plan", str(inventory.write(llama_server_profiles=profiles)), "--json")
    result = host_report(json.loads(done.stdout), inventory)
    (finding,) = [f for f in result["findings"] if f["rule"] == "LCPP-009"]
    assert finding["severity"] == "error" and finding["blocks"], finding
    assert finding["message"].startswith(
        f"profile alpha: llama-server {named(host, current)} does not accept --mlock"
    ), finding
    code, report, _ = apply(inventory, llama_server_profiles=profiles)
    assert code != 0
    assert "LCPP-009" in host_report(report, inventory)["skipped"]
    assert host.run("cat /etc/systemd/system/gpuprov-llama-alpha.service") == unit
    assert [host.main_pid(f"gpuprov-llama-{n}.service") for n in ("alpha", "beta")] == pids


def test_apply_checks_a_new_build_before_writing_any_unit(host: Host, inventory: Inventory) -> None:
    """A new build (another CMake argument): the gate can only read the running build's --help,
    a warning; apply builds, reads the new build's --help and fails the host before any unit
    or EnvironmentFile is written, so the running servers keep running as they were."""
    old = host.run(f"readlink {PREFIX}/current").strip()
    unit = host.run("cat /etc/systemd/system/gpuprov-llama-alpha.service")
    env = host.run("cat /etc/gpuprov/llama/alpha.env")
    pids = [host.main_pid(f"gpuprov-llama-{n}.service") for n in ("alpha", "beta")]
    changes = {
        "llama_server_profiles": with_extra_args(inventory, ["--jinja", "--mlock"]),
        "llama_cpp_cmake_args": ["-DLLAMA_BUILD_EXAMPLES=OFF"],  # a new build name
    }
    done = gpuprov("plan", str(inventory.write(**changes)), "--json")
    result = host_report(json.loads(done.stdout), inventory)
    (warning,) = [f for f in result["findings"] if f["rule"] == "LCPP-010"]
    assert warning["severity"] == "warning" and not warning["blocks"], warning
    assert f"llama-server {named(host, old)} (the build running now;" in warning["message"]
    assert "does not accept --mlock" in warning["message"]
    assert result["skipped"] in ("", None)
    code, report, stderr = apply(inventory, **changes)
    assert code != 0
    ops = {op["name"]: op["status"] for op in host_report(report, inventory)["operations"]}
    new = host.run(f"readlink {PREFIX}/current").strip()
    assert new != old and ops[f"Build llama-server {new.removeprefix('builds/')}"] == "changed"
    assert ops["Check the profiles' arguments against the new llama-server"] == "failed"
    assert ops["Unit gpuprov-llama-alpha.service"] == "not run"
    assert f"profile alpha: llama-server {named(host, new)} does not accept --mlock" in stderr
    assert "does not accept --jinja" not in stderr
    assert host.run("cat /etc/systemd/system/gpuprov-llama-alpha.service") == unit
    assert host.run("cat /etc/gpuprov/llama/alpha.env") == env
    assert [host.main_pid(f"gpuprov-llama-{n}.service") for n in ("alpha", "beta")] == pids
    assert '"ok"' in host.get(8081, "/health")


def test_forced_refused_flag_fails_apply_with_the_journal_and_a_diagnosis(
    host: Host, inventory: Inventory
) -> None:
    """`--force` past the gate writes alpha's unit with a flag its build refuses: the unit
    crash-loops, and apply's post-apply check says so, with the journal and what explain finds
    in it (LCPP-009), exit 1. beta is not touched."""
    apply(inventory)  # back to the built, serving stack
    beta = host.main_pid("gpuprov-llama-beta.service")
    profiles = with_extra_args(inventory, ["--mlock"])
    code, report, stderr = apply(inventory, "--force", settle=8, llama_server_profiles=profiles)
    assert code == 1, stderr
    check = host_report(report, inventory)["verification"]
    assert check["ok"] is False
    units = {u["unit"]: u for u in check["units"]}
    alpha = units["gpuprov-llama-alpha.service"]
    assert not alpha["ok"] and alpha["detail"].startswith("restarted"), alpha
    assert "error: invalid argument: --mlock" in alpha["journal"], alpha["journal"]
    assert alpha["diagnoses"][0]["rule"] == "LCPP-009"
    assert units["gpuprov-llama-beta.service"]["ok"], units
    assert host.main_pid("gpuprov-llama-beta.service") == beta
    text = gpuprov(
        "apply",
        str(inventory.write(llama_server_profiles=profiles)),
        "-y",
        "--force",
        "--settle",
        "4",
    )
    assert text.returncode == 1
    assert "FAILING     gpuprov-llama-alpha.service: " in text.stdout, text.stdout
    assert "| error: invalid argument: --mlock" in text.stdout
    assert "LCPP-009" in text.stdout
    # `gpuprov logs --explain` reads the same journal later, from the inventory alone.
    inventory_file = str(inventory.write(llama_server_profiles=profiles))
    logs = gpuprov(
        "logs", inventory_file, "alpha", "--since", "-10min", "--lines", "0", "--explain", "--json"
    )
    assert logs.returncode == 0, logs.stderr
    [log] = json.loads(logs.stdout)["logs"]
    assert log["unit"] == "gpuprov-llama-alpha.service" and log["error"] is None
    assert any("error: invalid argument: --mlock" in line for line in log["lines"])
    assert log["diagnoses"][0]["rule"] == "LCPP-009"
    unknown = gpuprov("logs", inventory_file, "gamma")
    assert unknown.returncode == 2 and "its services: alpha, beta, canary" in unknown.stderr


def test_a_crash_loop_ends_at_the_start_limit_and_the_canary_starts_it_again(host: Host) -> None:
    """systemd 252 has no RestartSteps: alpha, still refusing --mlock, is failed after 5 starts
    within its start limit instead of restarting every 2 s for ever; the canary starts it again
    once it has been down canary_cool_down (20 s)."""
    unit = "gpuprov-llama-alpha.service"
    assert int(host.run("systemctl --version").split()[1]) < 254
    assert "StartLimitBurst=5" in host.run(f"cat /etc/systemd/system/{unit}").splitlines()

    def state() -> str:
        return host.run(f"systemctl show -p ActiveState --value {unit}").strip()

    wait_for("systemd giving up on alpha", lambda: state() == "failed", 60)
    assert int(host.run(f"systemctl show -p NRestarts --value {unit}")) <= 5

    def started_again() -> bool:
        log = host.run("journalctl -q -u gpuprov-canary.service --no-pager -o cat", check=False)
        return f"starting {unit} again" in log

    wait_for("the canary starting alpha again", started_again, 90, step=2)
    log = host.run("journalctl -q -u gpuprov-canary.service --no-pager -o cat")
    assert f"{unit}: systemd gave up on it; to be started again after 20s down" in log


def test_a_healthy_stack_converges_again_and_then_changes_nothing(
    host: Host, inventory: Inventory
) -> None:
    code, report, stderr = apply(inventory)
    assert code == 0, stderr
    assert_verified(host_report(report, inventory))
    code, report, stderr = apply(inventory)
    assert code == 0, stderr
    result = host_report(report, inventory)
    assert result["changed"] == 0, [
        op for op in result["operations"] if op["status"] != "unchanged"
    ]
    assert_verified(result)


def test_uninstall_shows_its_plan_then_removes_what_gpuprov_installed(
    host: Host, inventory: Inventory
) -> None:
    """The plan first (no terminal: nothing removed, exit 2), then with -y every unit, config
    file, build, script, the canary and the servers' user go; the model stays, and so does the
    compiler cache mounted from outside (the inventory points the role at another folder). A
    second uninstall finds nothing."""
    path = str(inventory.write(llama_cpp_ccache_dir="/var/cache/gpuprov/ccache-of-this-test"))
    shown = gpuprov("uninstall", path)
    assert shown.returncode == 2 and "pass -y to uninstall" in shown.stderr
    assert "Stop removed profile gpuprov-llama-alpha.service" in shown.stdout
    assert host.active("gpuprov-llama-alpha.service")  # the plan changed nothing
    done = gpuprov("uninstall", path, "-y", "--json")
    assert done.returncode == 0, done.stderr
    for gone in (
        "/etc/systemd/system/gpuprov-llama-alpha.service",
        "/etc/systemd/system/gpuprov-llama-beta.service",
        "/etc/systemd/system/gpuprov-canary.timer",
        "/etc/gpuprov/llama",
        "/etc/gpuprov/canary.tsv",
        "/usr/local/lib/gpuprov/canary.py",
        "/usr/local/lib/gpuprov/llama-build.sh",
        PREFIX,
    ):
        assert not host.ok(f"test -e {gone}"), gone
    assert not host.active("gpuprov-llama-alpha.service")
    assert not host.ok("id gpuprov-llama")
    assert host.ok(f"test -f {MODEL}")
    assert host.ok("test -d /var/cache/gpuprov/ccache")
    again = json.loads(gpuprov("uninstall", path, "-y", "--json").stdout)
    assert again["hosts"][inventory.name]["changed"] == 0
