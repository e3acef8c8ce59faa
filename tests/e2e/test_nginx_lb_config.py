"""The balancer on real nginx: the rendered config, the install script, and the pyinfra task.

Real: a systemd test host with Debian's nginx (from the test-host image), the role's template
rendered by provision.nginx, roles/nginx_lb/files/gpuprov-lb-install.sh, two HTTP backends
(`python3 -m http.server` under systemd-run) reached through nginx, and the role's pyinfra task
applied over SSH, `gpuprov plan` over SSH (the diff of what nginx would serve), and
ansible-playbook running the role's tasks/main.yml on the same host. Nothing is stubbed. The tests
run in order and share the host "lbconf".
"""

from __future__ import annotations

import importlib.util
import json
import shlex
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from pyinfra.api import Config, Inventory, State
from pyinfra.api.connect import connect_all, disconnect_all
from pyinfra.api.deploy import add_deploy
from pyinfra.api.operations import run_ops

from checks.facts.model import HostFacts
from provision import nginx, stack
from provision.gate import HostGate
from provision.hostplan import HostPlan
from provision.testhost import hosts
from tests.e2e import hosts as e2e
from tests.support import ansible_play

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "nginx_lb"
SCRIPT = "/usr/local/lib/gpuprov/gpuprov-lb-install.sh"
RENDERED = "/etc/gpuprov/nginx/gpuprov-lb.conf"
DST = "/etc/nginx/conf.d/gpuprov-lb.conf"
BACKENDS = {"backend-1": 8501, "backend-2": 8502}
LISTEN = 8400
DATA: dict[str, Any] = {
    "nginx_lb_enabled": True,
    "nginx_lb_listen": LISTEN,
    "nginx_lb_servers": [f"127.0.0.1:{port}" for port in BACKENDS.values()],
}

pytestmark = pytest.mark.e2e


class Host:
    """Shell access to the test host."""

    def __init__(self, record: hosts.TestHost) -> None:
        self.record = record

    def run(self, command: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            hosts.ssh_command(self.record, command),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def sh(self, command: str) -> str:
        done = self.run(command)
        assert done.returncode == 0, f"{command!r} failed ({done.returncode}): {done.stderr}"
        return done.stdout

    def put(self, path: str, text: str) -> None:
        folder = shlex.quote(str(Path(path).parent))
        done = self.run(f"mkdir -p {folder} && cat > {shlex.quote(path)}", stdin=text)
        assert done.returncode == 0, done.stderr

    def install(self) -> subprocess.CompletedProcess[str]:
        return self.run(f"{SCRIPT} {RENDERED} {DST}")

    def get(self, path: str, port: int = LISTEN) -> str:
        return self.run(f"curl -sf -m 5 http://127.0.0.1:{port}{path}").stdout

    def nginx_pids(self) -> tuple[str, list[str]]:
        """nginx's master PID and its workers' PIDs (new workers mean a reload)."""
        master = self.sh("systemctl show -p MainPID --value nginx.service").strip()
        workers = self.run(f"pgrep -P {master}").stdout.split()
        return master, sorted(workers)

    def conf_d(self) -> list[str]:
        return self.sh("ls -A /etc/nginx/conf.d").split()


def wait_for(what: str, check: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.3)
    raise AssertionError(f"{what}: not within {timeout}s")


def config(**changes: Any) -> str:
    data = {**DATA, **changes}
    stack.from_data(data)
    return nginx.render(stack.variables(data))


def answers(host: Host, count: int = 12) -> set[str]:
    return {host.get("/who").strip() for _ in range(count)}


@pytest.fixture(scope="module")
def host(testhost_factory: Callable[[str], hosts.TestHost]) -> Iterator[Host]:
    h = Host(testhost_factory("lbconf"))
    for name, port in BACKENDS.items():
        h.sh(f"mkdir -p /srv/{name} && echo {name} > /srv/{name}/who")
        h.run(f"systemctl stop {name}; systemctl reset-failed {name}")
        h.sh(
            f"systemd-run --unit {name} python3 -m http.server {port}"
            f" --bind 127.0.0.1 --directory /srv/{name}"
        )
        wait_for(f"{name} answering", lambda p=port, n=name: h.get("/who", p).strip() == n)
    h.sh(f"rm -f {DST} {RENDERED} && systemctl restart nginx.service")
    h.put(SCRIPT, (ROLE / "files" / "gpuprov-lb-install.sh").read_text())
    h.sh(f"chmod 755 {SCRIPT}")
    yield h
    for name in BACKENDS:
        h.run(f"systemctl stop {name}")


def test_rendered_config_passes_nginx_t_and_is_installed(host: Host) -> None:
    host.put(RENDERED, config())
    before = host.nginx_pids()
    done = host.install()
    assert (done.returncode, done.stdout) == (0, "changed\n"), done.stderr
    assert host.sh(f"cat {DST}") == config()
    assert host.run("nginx -t").returncode == 0
    wait_for("the balancer's health answer", lambda: host.get("/gpuprov-lb-health") == "ok\n")
    master, workers = host.nginx_pids()
    assert master == before[0]  # reloaded, not restarted
    assert workers != before[1]
    assert host.conf_d() == ["gpuprov-lb.conf"]


def test_both_backends_are_reached_through_the_balancer(host: Host) -> None:
    assert answers(host) == set(BACKENDS)


def test_unchanged_config_does_not_reload(host: Host) -> None:
    before = host.nginx_pids()
    done = host.install()
    assert (done.returncode, done.stdout) == (0, "unchanged\n"), done.stderr
    time.sleep(1)  # a reload would have replaced the workers by now
    assert host.nginx_pids() == before


def test_changed_config_reloads_running_nginx(host: Host) -> None:
    master, workers = host.nginx_pids()
    host.put(RENDERED, config(nginx_lb_read_timeout=600))
    done = host.install()
    assert (done.returncode, done.stdout) == (0, "changed\n"), done.stderr
    wait_for("new workers after the reload", lambda: host.nginx_pids()[1] != workers)
    assert host.nginx_pids()[0] == master
    assert "proxy_read_timeout 600s;" in host.sh("nginx -T 2>/dev/null")
    assert answers(host) == set(BACKENDS)


def test_broken_config_is_refused_and_the_old_one_keeps_serving(host: Host) -> None:
    serving = host.sh(f"cat {DST}")
    before = host.nginx_pids()
    host.put(RENDERED, config() + "bogus_directive on;\n")
    done = host.install()
    assert done.returncode == 1
    assert done.stdout == ""
    assert 'unknown directive "bogus_directive"' in done.stderr
    assert "the previous /etc/nginx/conf.d/gpuprov-lb.conf is back in place" in done.stderr
    assert host.sh(f"cat {DST}") == serving
    assert host.conf_d() == ["gpuprov-lb.conf"]
    assert host.run("nginx -t").returncode == 0
    time.sleep(1)
    assert host.nginx_pids() == before
    assert host.get("/gpuprov-lb-health") == "ok\n"
    assert answers(host) == set(BACKENDS)


def test_broken_first_install_leaves_no_file(host: Host) -> None:
    host.sh(f"rm {DST} && systemctl reload nginx.service")
    wait_for("the balancer gone", lambda: host.run(f"curl -s -m 2 127.0.0.1:{LISTEN}").returncode)
    done = host.install()  # RENDERED is still the broken one
    assert done.returncode == 1
    assert "is not installed" in done.stderr
    assert host.conf_d() == []
    assert host.sh("systemctl is-active nginx.service").strip() == "active"


def test_stopped_nginx_is_started_with_the_config(host: Host) -> None:
    host.sh("systemctl stop nginx.service")
    host.put(RENDERED, config())
    done = host.install()
    assert (done.returncode, done.stdout) == (0, "changed\n"), done.stderr
    assert host.sh("systemctl is-active nginx.service").strip() == "active"
    wait_for("the balancer's health answer", lambda: host.get("/gpuprov-lb-health") == "ok\n")
    assert answers(host) == set(BACKENDS)


# --- the pyinfra task --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def task() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gpuprov_roles.nginx_lb_e2e", ROLE / "tasks" / "nginx_lb.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def apply(host: Host, task: ModuleType, **changes: Any) -> dict[str, bool]:
    """Run the role's pyinfra task on the host; {operation name: changed}."""
    data = {**DATA, **changes}
    name, connection = hosts.pyinfra_host(host.record)
    plan = HostPlan(name, stack.from_data(data), stack.variables(data), HostGate(name, HostFacts()))
    state = State(Inventory(([(name, connection)], {})), Config())
    connect_all(state)
    try:
        add_deploy(state, task.nginx_lb, plan)
        run_ops(state)
        (target,) = state.inventory
        assert not state.failed_hosts
        return {
            ", ".join(sorted(state.get_op_meta(op_hash).names)): op.operation_meta.did_change()
            for op_hash in state.get_op_order()
            if (op := state.ops[target].get(op_hash)) is not None
        }
    finally:
        disconnect_all(state)


def test_pyinfra_task_installs_then_changes_nothing(host: Host, task: ModuleType) -> None:
    host.sh(f"rm -f {DST} {RENDERED} {SCRIPT} && systemctl reload nginx.service")
    first = apply(host, task, nginx_lb_read_timeout=300)
    assert any(changed and "Install /etc/nginx" in op for op, changed in first.items()), first
    assert host.sh(f"cat {DST}") == config(nginx_lb_read_timeout=300)
    assert host.sh(f"stat -c %a {RENDERED} {SCRIPT}").split() == ["644", "755"]
    wait_for("the balancer's health answer", lambda: host.get("/gpuprov-lb-health") == "ok\n")
    assert answers(host) == set(BACKENDS)
    before = host.nginx_pids()
    again = apply(host, task, nginx_lb_read_timeout=300)
    assert not any(again.values()), again
    assert not any("Install /etc/nginx" in op for op in again), again
    assert host.nginx_pids() == before


def test_pyinfra_task_puts_back_a_config_edited_by_hand(host: Host, task: ModuleType) -> None:
    host.sh(f"sed -i 's/least_conn;/least_conn; # edited/' {DST}")
    ops = apply(host, task, nginx_lb_read_timeout=300)
    assert any(changed and "Install /etc/nginx" in op for op, changed in ops.items()), ops
    assert host.sh(f"cat {DST}") == config(nginx_lb_read_timeout=300)


# --- `gpuprov plan`: the diff of what nginx would serve -------------------------------------------


def plan(host: Host, tmp_path: Path, **changes: Any) -> tuple[str | None, str]:
    """`gpuprov plan` of the host with DATA and `changes`: the JSON host entry's balancer_diff,
    and the text plan's stderr (where pyinfra's diffs go)."""
    inventory = e2e.Inventory(tmp_path / "inventory.py", host.record, DATA)
    path = str(inventory.write(**changes))
    done = e2e.gpuprov("plan", path, "--json", timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    entry = json.loads(done.stdout)["hosts"][inventory.name]
    text = e2e.gpuprov("plan", path, timeout=600)
    assert text.returncode == 0, text.stderr[-4000:]
    return entry["balancer_diff"], text.stderr


def shown(stderr: str) -> list[str]:
    """The balancer diff in the text plan, unindented; [] when none is shown."""
    lines = stderr.splitlines()
    head = f"Will change {DST}, the config nginx serves:"
    heads = [i for i, line in enumerate(lines) if line.endswith(head)]
    if not heads:
        return []
    block = []
    for line in lines[heads[0] + 1 :]:
        if not line:
            break
        block.append(line.removeprefix("  "))
    return block


def test_plan_of_the_converged_balancer_shows_no_diff(host: Host, tmp_path: Path) -> None:
    diff, stderr = plan(host, tmp_path, nginx_lb_read_timeout=300)
    assert diff is None
    assert shown(stderr) == []


def test_plan_shows_a_hand_edit_of_conf_d(host: Host, tmp_path: Path) -> None:
    """The rendered copy is current, so only the install script would run: the diff is conf.d's
    file against the config, and the plan changes nothing."""
    host.sh(f"sed -i 's/least_conn;/least_conn; # edited/' {DST}")
    try:
        before = host.nginx_pids()
        diff, stderr = plan(host, tmp_path, nginx_lb_read_timeout=300)
        assert diff is not None
        lines = diff.splitlines()
        assert lines[:2] == [f"--- {DST} (on the host)", f"+++ {DST} (from gpuprov)"]
        assert [line for line in lines[2:] if line[:1] in "+-"] == [
            "-    least_conn; # edited",
            "+    least_conn;",
        ]
        assert shown(stderr) == lines
        assert "least_conn; # edited" in host.sh(f"cat {DST}")
        assert host.nginx_pids() == before
    finally:
        host.sh(f"sed -i 's/least_conn; # edited/least_conn;/' {DST}")
    assert host.sh(f"cat {DST}") == config(nginx_lb_read_timeout=300)


def test_plan_after_a_change_nginx_never_took_shows_it(host: Host, tmp_path: Path) -> None:
    """An apply that wrote the rendered copy and then failed (nginx -t, or the reload) leaves
    that copy ahead of conf.d: pyinfra has no diff for it, the plan still shows 300s -> 600s."""
    host.put(RENDERED, config(nginx_lb_read_timeout=600))
    try:
        diff, stderr = plan(host, tmp_path, nginx_lb_read_timeout=600)
        assert diff is not None
        assert [line for line in diff.splitlines()[2:] if line[:1] in "+-"] == [
            "-        proxy_read_timeout 300s;",
            "-        proxy_send_timeout 300s;",
            "+        proxy_read_timeout 600s;",
            "+        proxy_send_timeout 600s;",
        ]
        assert shown(stderr) == diff.splitlines()
        assert f"Will modify {RENDERED}" not in stderr  # what pyinfra alone would show: nothing
    finally:
        host.put(RENDERED, config(nginx_lb_read_timeout=300))


def test_plan_of_turning_the_balancer_off_shows_its_removal(host: Host, tmp_path: Path) -> None:
    diff, stderr = plan(host, tmp_path, nginx_lb_enabled=False)
    assert diff is not None
    lines = diff.splitlines()
    assert lines[:2] == [f"--- {DST} (on the host)", "+++ /dev/null"]
    assert lines[3:] == [f"-{line}" for line in config(nginx_lb_read_timeout=300).splitlines()]
    assert shown(stderr) == lines
    assert host.run(f"test -f {DST}").returncode == 0


# --- the Ansible role ---------------------------------------------------------------------------


def ansible(host: Host, folder: Path, **changes: Any) -> int:
    """ansible-playbook running the role on the host; the recap's changed count."""
    done = ansible_play.run_roles(host.record, folder, ["nginx_lb"], {**DATA, **changes})
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    return ansible_play.recap_changed(done.stdout)


def test_ansible_role_finds_the_pyinfra_install_converged(host: Host, tmp_path: Path) -> None:
    before = host.nginx_pids()
    assert ansible(host, tmp_path, nginx_lb_read_timeout=300) == 0
    assert host.nginx_pids() == before


def test_ansible_role_installs_a_change_then_changes_nothing(host: Host, tmp_path: Path) -> None:
    master, workers = host.nginx_pids()
    assert ansible(host, tmp_path, nginx_lb_read_timeout=450) == 2  # rendered file, conf.d
    assert host.sh(f"cat {DST}") == config(nginx_lb_read_timeout=450)
    wait_for("new workers after the reload", lambda: host.nginx_pids()[1] != workers)
    assert host.nginx_pids()[0] == master
    assert answers(host) == set(BACKENDS)
    assert ansible(host, tmp_path, nginx_lb_read_timeout=450) == 0


def test_pyinfra_task_removes_the_balancer_when_turned_off(host: Host, task: ModuleType) -> None:
    ops = apply(host, task, nginx_lb_enabled=False)
    assert any(changed and op.endswith(f"Remove {DST}") for op, changed in ops.items()), ops
    assert host.run(f"test -e {DST}").returncode == 1
    wait_for("the balancer gone", lambda: host.run(f"curl -s -m 2 127.0.0.1:{LISTEN}").returncode)
    assert host.sh("systemctl is-active nginx.service").strip() == "active"
    assert apply(host, task, nginx_lb_enabled=False) == {}


def test_ansible_role_turned_off_finds_nothing_to_remove(host: Host, tmp_path: Path) -> None:
    assert ansible(host, tmp_path, nginx_lb_enabled=False) == 0


def test_ansible_role_removes_the_balancer_when_turned_off(host: Host, tmp_path: Path) -> None:
    assert ansible(host, tmp_path) > 0
    wait_for("the balancer's health answer", lambda: host.get("/gpuprov-lb-health") == "ok\n")
    assert ansible(host, tmp_path, nginx_lb_enabled=False) > 0
    assert host.run(f"test -e {DST} || test -e {RENDERED}").returncode == 1
    wait_for("the balancer gone", lambda: host.run(f"curl -s -m 2 127.0.0.1:{LISTEN}").returncode)
    assert host.sh("systemctl is-active nginx.service").strip() == "active"


def test_plan_of_a_first_install_shows_the_whole_config(host: Host, tmp_path: Path) -> None:
    """Neither file is there (the Ansible role removed both): every line of the config is new."""
    assert host.run(f"test -e {DST} || test -e {RENDERED}").returncode == 1
    diff, stderr = plan(host, tmp_path)
    assert diff is not None
    lines = diff.splitlines()
    assert lines[:2] == ["--- /dev/null", f"+++ {DST} (from gpuprov)"]
    assert lines[3:] == [f"+{line}" for line in config().splitlines()]
    assert shown(stderr) == lines
