"""What `gpuprov plan` shows of the balancer: a diff of the config nginx serves, whenever it would
change, in the text output and in the JSON host entry.

Real: the nginx_lb role's pyinfra task (imported by path) planned by pyinfra against this machine
(@local, nothing executed), its config rendered by provision.nginx, and `gpuprov plan` run as a
user runs it. Stand-in: `systemctl` on PATH, which answers pyinfra's `systemctl show` for
nginx.service (this machine runs no systemd). conf.d's file and the rendered copy live under
tmp_path. Real nginx takes the same diffs in tests/e2e/test_nginx_lb_config.py.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import pytest
from pyinfra.api import Config, Inventory, State
from pyinfra.api.connect import connect_all, disconnect_all
from pyinfra.api.deploy import add_deploy

from checks.facts.model import HostFacts
from checks.reporting import schema
from provision import envsecrets, hostplan, nginx, stack
from provision.gate import HostGate
from provision.hostplan import HostPlan

ROOT = Path(__file__).resolve().parent.parent
GPUPROV = Path(sys.executable).parent / "gpuprov"
SYSTEMCTL = """\
#!/bin/sh
[ "$1" = show ] && printf 'Id=nginx.service\\nSubState=running\\n'
exit 0
"""
DATA: dict[str, Any] = {"nginx_lb_enabled": True, "nginx_lb_servers": ["127.0.0.1:8500"]}
INSTALL = "Install {conf} (nginx -t, then reload)"


def config(**changes: Any) -> str:
    data = {**DATA, **changes}
    stack.from_data(data)
    return nginx.render(stack.variables(data))


@pytest.fixture(scope="module")
def task() -> ModuleType:
    path = ROOT / "roles" / "nginx_lb" / "tasks" / "nginx_lb.py"
    spec = importlib.util.spec_from_file_location("gpuprov_roles.nginx_lb_plan_test", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder holding the stand-in systemctl, first on PATH."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "systemctl").write_text(SYSTEMCTL)
    (folder / "systemctl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    return folder


@pytest.fixture
def pyinfra_log() -> Iterator[list[str]]:
    """What pyinfra's logger says at INFO, as `gpuprov plan` shows it."""
    said: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record.getMessage())

    logger = logging.getLogger("pyinfra")
    handler, level = Keep(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield said
    logger.removeHandler(handler)
    logger.setLevel(level)


class Box:
    """This machine as the balancer's host, its two files under tmp_path."""

    def __init__(self, root: Path, task: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
        self.conf = root / "conf.d" / "gpuprov-lb.conf"
        self.rendered = root / "gpuprov" / "nginx" / "gpuprov-lb.conf"
        self.task = task
        monkeypatch.setattr(task, "RENDERED", str(self.rendered))

    def holds(self, serving: str | None, rendered: str | None) -> None:
        """conf.d's file and the rendered copy (None: absent, with its folder)."""
        for path, text in ((self.conf, serving), (self.rendered, rendered)):
            if text is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)

    def plan(self, diff: bool = True, **changes: Any) -> tuple[HostPlan, list[str]]:
        """The role planned on @local: the host's plan and the names of its operations."""
        data = {**DATA, "nginx_lb_conf": str(self.conf), **changes}
        plan = HostPlan(
            "@local", stack.from_data(data), stack.variables(data), HostGate("@local", HostFacts())
        )
        state = State(Inventory((["@local"], {})), Config(DIFF=diff))
        connect_all(state)
        try:
            add_deploy(state, self.task.nginx_lb, plan)
            (host,) = state.inventory
            names = [
                ", ".join(n.rsplit(" | ", 1)[-1] for n in state.get_op_meta(op_hash).names)
                for op_hash in state.get_op_order()
                if op_hash in state.ops[host]
            ]
        finally:
            disconnect_all(state)
        return plan, names


@pytest.fixture
def box(tmp_path: Path, task: ModuleType, standin: Path, monkeypatch: pytest.MonkeyPatch) -> Box:
    return Box(tmp_path, task, monkeypatch)


def shown(said: list[str], conf: Path) -> list[str]:
    """The diff the role logged for conf.d's file (its lines, unindented), or []."""
    heads = [
        i
        for i, line in enumerate(said)
        if line.endswith(f"Will change {conf}, the config nginx serves:")
    ]
    assert len(heads) <= 1, said
    block: list[str] = []
    for line in said[heads[0] + 1 :] if heads else []:
        if not line:
            break
        block.append(line.removeprefix("  "))
    return block


# --- the role's plan ---------------------------------------------------------------------------


def test_hand_edited_conf_d_is_diffed_though_the_rendered_copy_is_current(
    box: Box, pyinfra_log: list[str]
) -> None:
    """Only the install script would run: pyinfra had nothing to diff, so no diff was shown."""
    box.holds(config().replace("least_conn;", "least_conn; # edited"), config())
    plan, ops = box.plan()
    assert INSTALL.format(conf=box.conf) in ops
    assert plan.balancer_diff is not None
    assert plan.balancer_diff.splitlines() == [
        f"--- {box.conf} (on the host)",
        f"+++ {box.conf} (from gpuprov)",
        "@@ -2,7 +2,7 @@",
        " # One endpoint for the host's vLLM replicas: each request goes to the backend with the"
        " fewest",
        " # active connections, so one long completion does not hold others up behind it.",
        " upstream gpuprov_lb {",
        "-    least_conn; # edited",
        "+    least_conn;",
        "     server 127.0.0.1:8500 max_fails=3 fail_timeout=10s;",
        "     keepalive 16;",
        " }",
    ]
    assert shown(pyinfra_log, box.conf) == plan.balancer_diff.splitlines()


def test_changed_setting_is_diffed_against_what_nginx_serves(
    box: Box, pyinfra_log: list[str]
) -> None:
    """conf.d's file, not the rendered copy (which a failed `nginx -t` left ahead of it)."""
    box.holds(config(nginx_lb_read_timeout=300), config(nginx_lb_read_timeout=600))
    plan, ops = box.plan(nginx_lb_read_timeout=600)
    assert INSTALL.format(conf=box.conf) in ops
    assert plan.balancer_diff is not None
    changed = [line for line in plan.balancer_diff.splitlines()[2:] if line[:1] in "+-"]
    assert changed == [
        "-        proxy_read_timeout 300s;",
        "-        proxy_send_timeout 300s;",
        "+        proxy_read_timeout 600s;",
        "+        proxy_send_timeout 600s;",
    ]
    assert shown(pyinfra_log, box.conf) == plan.balancer_diff.splitlines()


def test_first_install_is_diffed_from_nothing(box: Box, pyinfra_log: list[str]) -> None:
    """No folders yet: pyinfra stops at the mkdir and shows nothing of the rendered copy."""
    plan, ops = box.plan()
    assert INSTALL.format(conf=box.conf) in ops
    assert plan.balancer_diff is not None
    lines = plan.balancer_diff.splitlines()
    assert lines[:2] == ["--- /dev/null", f"+++ {box.conf} (from gpuprov)"]
    assert lines[3:] == [f"+{line}" for line in config().splitlines()]
    assert shown(pyinfra_log, box.conf) == lines


def test_empty_conf_d_file_is_not_a_missing_one(box: Box) -> None:
    box.holds("", config())
    plan, _ = box.plan()
    assert plan.balancer_diff is not None
    assert plan.balancer_diff.splitlines()[0] == f"--- {box.conf} (on the host)"


def test_converged_balancer_shows_nothing(box: Box, pyinfra_log: list[str]) -> None:
    box.holds(config(), config())
    plan, ops = box.plan()
    assert INSTALL.format(conf=box.conf) not in ops
    assert plan.balancer_diff is None
    assert shown(pyinfra_log, box.conf) == []


def test_only_the_rendered_copy_changing_shows_no_balancer_diff(
    box: Box, pyinfra_log: list[str]
) -> None:
    """The rendered copy was lost but nginx serves the right config: nothing it serves changes."""
    box.holds(config(), None)
    plan, ops = box.plan()
    assert (
        INSTALL.format(conf=box.conf) in ops
    )  # the script runs, says "unchanged", reloads nothing
    assert plan.balancer_diff is None
    assert shown(pyinfra_log, box.conf) == []


def test_turning_the_balancer_off_diffs_its_removal(box: Box, pyinfra_log: list[str]) -> None:
    box.holds(config(), config())
    plan, ops = box.plan(nginx_lb_enabled=False)
    assert f"Remove {box.conf}" in ops
    assert plan.balancer_diff is not None
    lines = plan.balancer_diff.splitlines()
    assert lines[:2] == [f"--- {box.conf} (on the host)", "+++ /dev/null"]
    assert lines[3:] == [f"-{line}" for line in config().splitlines()]
    assert shown(pyinfra_log, box.conf) == lines


def test_without_diffs_the_plan_still_carries_it(box: Box, pyinfra_log: list[str]) -> None:
    """`--json` plans without pyinfra's diffs: nothing logged, the diff kept for the JSON."""
    box.holds(config(nginx_lb_keepalive=8), config())
    plan, _ = box.plan(diff=False)
    assert plan.balancer_diff is not None and "+    keepalive 16;" in plan.balancer_diff
    assert not any("Will change" in line for line in pyinfra_log)


def test_known_secret_on_the_host_is_masked(box: Box, pyinfra_log: list[str]) -> None:
    """gpuprov writes no secret into the balancer; one pasted into conf.d by hand stays hidden."""
    secret = envsecrets.remember("sk-balancer-test-8f3a")
    pasted = config().replace(
        "    location / {\n",
        f'    location / {{\n        proxy_set_header Authorization "Bearer {secret}";\n',
    )
    box.holds(pasted, config())
    plan, _ = box.plan()
    assert plan.balancer_diff is not None
    assert f'-        proxy_set_header Authorization "Bearer {envsecrets.MASK}";' in (
        plan.balancer_diff.splitlines()
    )
    assert secret not in plan.balancer_diff
    assert not any(secret in line for line in pyinfra_log)


def test_rendered_config_holds_no_secret() -> None:
    """The replicas' API keys and tokens, read for the same host, never reach its balancer."""
    replica = {
        "name": "r1",
        "model": "Org/Model",
        "port": 8500,
        "gpus": [0],
        "api_key_env": "R1_KEY",
        "hf_token_env": "R1_HF",
    }
    data = {"nginx_lb_enabled": True, "vllm_replicas": [replica]}
    found = hostplan.secrets(stack.from_data(data), {"R1_KEY": "sk-r1-4d2c", "R1_HF": "hf_9b1e"})
    assert sorted(found.values()) == ["hf_9b1e", "sk-r1-4d2c"]
    text = nginx.render(stack.variables(data))
    assert not any(value in text for value in found.values())
    assert "Authorization" not in text


def test_pyinfra_shows_no_diff_of_a_file_whose_folder_it_creates(
    box: Box, pyinfra_log: list[str]
) -> None:
    """Why the balancer needs a diff of its own even on a first install: pyinfra decides that an
    operation changes something at its first command, here the rendered copy's mkdir, and logs
    files.put's diff only after it."""
    box.plan()
    assert not any(str(box.rendered) in line for line in pyinfra_log)
    assert shown(pyinfra_log, box.conf)


# --- `gpuprov plan`, as users run it -------------------------------------------------------------


def gpuprov_plan(tmp_path: Path, standin: Path, *options: str) -> subprocess.CompletedProcess[str]:
    inventory = tmp_path / "inv.py"
    data = {**DATA, "nginx_lb_conf": str(tmp_path / "conf.d" / "gpuprov-lb.conf")}
    inventory.write_text(f"hosts = [('@local', {data!r})]\n")
    env = {**os.environ, "PATH": f"{standin}:{os.environ['PATH']}"}
    return subprocess.run(
        [str(GPUPROV), "plan", str(inventory), *options],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def test_plan_prints_the_diff_and_its_json_carries_it(tmp_path: Path, standin: Path) -> None:
    conf = tmp_path / "conf.d" / "gpuprov-lb.conf"
    conf.parent.mkdir()
    conf.write_text(config(nginx_lb_max_fails=5))
    text = gpuprov_plan(tmp_path, standin)
    assert text.returncode == 0, text.stderr
    assert f"[@local] Will change {conf}, the config nginx serves:" in text.stderr
    diff = [
        f"  --- {conf} (on the host)",
        f"  +++ {conf} (from gpuprov)",
        "  @@ -3,7 +3,7 @@",
        "   # active connections, so one long completion does not hold others up behind it.",
        "   upstream gpuprov_lb {",
        "       least_conn;",
        "  -    server 127.0.0.1:8500 max_fails=5 fail_timeout=10s;",
        "  +    server 127.0.0.1:8500 max_fails=3 fail_timeout=10s;",
        "       keepalive 16;",
        "   }",
        "   ",
    ]
    lines = text.stderr.splitlines()
    start = lines.index(diff[0])
    assert lines[start : start + len(diff)] == diff
    assert f"Install {conf} (nginx -t, then reload)" in text.stdout

    done = gpuprov_plan(tmp_path, standin, "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    jsonschema.validate(data, schema.committed("converge"))
    entry = data["hosts"]["@local"]
    assert entry["balancer_diff"].splitlines() == [line[2:] for line in diff]
    assert "Will change" not in done.stderr


def test_plan_of_a_converged_balancer_has_no_diff(tmp_path: Path, standin: Path) -> None:
    conf = tmp_path / "conf.d" / "gpuprov-lb.conf"
    conf.parent.mkdir()
    conf.write_text(config())
    done = gpuprov_plan(tmp_path, standin, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["hosts"]["@local"]["balancer_diff"] is None
