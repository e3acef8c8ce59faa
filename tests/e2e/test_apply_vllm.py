"""`gpuprov plan` and `apply` of vLLM replicas behind nginx on a real systemd test host.

Real: the test host (systemd as PID 1, SSH), pyinfra, the gate's probes and rules, systemd units,
restarts and the canary timer, nginx (least_conn) in front of the replicas, `nginx -t`.
Stand-ins, because no Docker engine and no GPU exist here (tests/support/standin_*.py):
`docker` records its arguments, "pulls" from a catalog of published images' real environments
(tests/fixtures/images/) and serves a small OpenAI-compatible endpoint in place of the container;
`nvidia-smi` answers the probe for two RTX 3090s on the driver a test chooses. So the image tag,
the preflight, the units, ordering, restarts, the balancer and the canary are exercised for real,
while no container and no model run. The tests run in order on one host.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from provision.testhost import hosts
from tests.e2e.hosts import (
    GPUS_570,
    GPUS_580,
    ROOT,
    VLLM_BASE,
    Host,
    Inventory,
    apply,
    gpuprov,
    host_report,
    vllm_host,
    wait_for,
)
from tests.support import ansible_play, standins

pytestmark = pytest.mark.e2e

IMAGE_CUDA13 = "vllm/vllm-openai:v0.23.0"
HF_TOKEN = "hf_e2e-token-never-in-argv"
API_KEY = "e2e-api-key"
UNITS = ("gpuprov-vllm-qwen-1.service", "gpuprov-vllm-qwen-2.service")
REPLICA = {
    "model": "Lorbus/Qwen3.6-27B-int4-AutoRound",
    "served_model_name": "qwen36-27b",
    "gpu_memory_utilization": 0.92,
    "max_num_seqs": 2,
    "hf_token_env": "GPUPROV_E2E_HF_TOKEN",
    "api_key_env": "GPUPROV_E2E_VLLM_KEY",
}


@pytest.fixture(scope="module")
def host(testhost_factory: Callable[[str], hosts.TestHost]) -> Host:
    return vllm_host(testhost_factory, "e2e-vllm")


def two_replicas() -> dict[str, Any]:
    """Two replicas, one per GPU, behind the balancer, with a quick canary."""
    return {
        **VLLM_BASE,
        "vllm_replicas": [
            {**REPLICA, "name": "qwen-1", "port": 8500, "gpus": [0]},
            {**REPLICA, "name": "qwen-2", "port": 8501, "gpus": [1]},
        ],
        "nginx_lb_enabled": True,
        "nginx_lb_listen": 8400,
        "canary_interval": 5,
        "canary_timeout": 3,
    }


@pytest.fixture(scope="module")
def inventory(host: Host, tmp_path_factory: Any) -> Inventory:
    return Inventory(tmp_path_factory.mktemp("inv") / "inventory.py", host.record, two_replicas())


@pytest.fixture(autouse=True)
def secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUPROV_E2E_HF_TOKEN", HF_TOKEN)
    monkeypatch.setenv("GPUPROV_E2E_VLLM_KEY", API_KEY)


def set_driver(host: Host, gpus: Path) -> None:
    host.run(f"cat > /etc/standin-nvidia-smi/gpus.json <<'EOF'\n{gpus.read_text()}\nEOF")


def request(host: Host, path: str, key: str = API_KEY, port: int = 8400) -> tuple[int, str, str]:
    """(HTTP status, X-Standin-Container, body) of one completion through `port`."""
    body = json.dumps({"model": "qwen36-27b", "prompt": "Hi", "max_tokens": 1})
    auth = f"-H 'Authorization: Bearer {key}'" if key else ""
    out = host.run(
        f"curl -s -m 10 -D - -o /tmp/body -w '%{{http_code}}' {auth} "
        f"-H 'Content-Type: application/json' -d '{body}' http://127.0.0.1:{port}{path}; "
        "echo; cat /tmp/body",
        check=False,
    )
    headers, _, rest = out.replace("\r\n", "\n").partition("\n\n")
    status, _, text = rest.partition("\n")
    container = ""
    for line in headers.splitlines():
        name, _, value = line.partition(":")
        if name.lower() == "x-standin-container":
            container = value.strip()
    return int(status or 0), container, text


def test_plan_names_the_image_and_fits(host: Host, inventory: Inventory) -> None:
    done = gpuprov("plan", str(inventory.write()), "--json")
    assert done.returncode == 0, done.stderr
    result = host_report(json.loads(done.stdout), inventory)
    assert result["image"]["ref"] == IMAGE_CUDA13
    assert result["vram"]["fits"] is True
    assert any(op["name"].startswith(f"Pull {IMAGE_CUDA13}") for op in result["operations"])
    for unit in UNITS:  # a plan changes nothing
        assert not host.ok(f"test -e /etc/systemd/system/{unit}")
    assert not [c for c in standins.calls(host.record) if c["argv"][:1] == ["pull"]]


def test_apply_pulls_then_starts_the_replicas(host: Host, inventory: Inventory) -> None:
    code, report, stderr = apply(inventory)
    assert code == 0, stderr
    check = host_report(report, inventory)["verification"]
    assert check["ok"], check
    answered = {u["unit"]: u["detail"] for u in check["units"]}
    assert set(answered) == {*UNITS, "nginx.service", "gpuprov-canary.timer"}
    for unit in (*UNITS, "nginx.service"):  # replicas, and the balancer in front of them
        assert "ok: 1 token in" in answered[unit], answered
    assert "Pulling from vllm/vllm-openai" in stderr  # docker's progress is shown
    calls = [c["argv"] for c in standins.calls(host.record)]
    pulls = [i for i, a in enumerate(calls) if a[:2] == ["pull", IMAGE_CUDA13]]
    runs = [i for i, a in enumerate(calls) if a[:1] == ["run"]]
    assert pulls and runs and pulls[0] < runs[0]
    for unit in UNITS:
        assert host.active(unit)
        assert host.ok(f"systemctl is-enabled {unit}")
        host.run(f"systemd-analyze verify /etc/systemd/system/{unit}")
    assert host.run("stat -c %a /etc/gpuprov/vllm/qwen-1.env").strip() == "600"
    host.run("nginx -t")


def test_token_reaches_the_container_only_through_the_env_file(host: Host) -> None:
    assert HF_TOKEN not in host.run("cat /etc/systemd/system/gpuprov-vllm-qwen-1.service")
    assert HF_TOKEN not in host.run("ps -eo args")
    assert HF_TOKEN not in host.run("cat /var/lib/standin-docker/calls.log")
    runs = [c for c in standins.calls(host.record) if c["argv"][:1] == ["run"]]
    assert "HF_TOKEN" in runs[-1]["env"]  # passed by name, its value hashed in the log
    args = runs[-1]["argv"]
    assert args[args.index("--gpus") + 1] in ('"device=0"', '"device=1"')
    assert "--ipc" in args and "--shm-size" in args


def test_balancer_spreads_over_both_replicas(host: Host) -> None:
    wait_for("the balancer", lambda: request(host, "/v1/completions")[0] == 200, 30)
    seen = {request(host, "/v1/completions")[1] for _ in range(6)}
    assert seen == {"gpuprov-vllm-qwen-1", "gpuprov-vllm-qwen-2"}
    status, _, _ = request(host, "/v1/completions", key="")
    assert status == 401  # VLLM_API_KEY reached the container


def test_canary_checks_replicas_and_balancer(host: Host) -> None:
    def logged() -> bool:
        log = host.run("journalctl -q -u gpuprov-canary.service --no-pager", check=False)
        return all(f"{u}: ok" in log for u in (*UNITS, "nginx.service"))

    wait_for("canary checks in the journal", logged, 40, step=2)


def test_second_apply_changes_nothing(host: Host, inventory: Inventory) -> None:
    pids = [host.main_pid(u) for u in UNITS]
    pulls = len([c for c in standins.calls(host.record) if c["argv"][:1] == ["pull"]])
    code, report, stderr = apply(inventory)
    assert code == 0, stderr
    result = host_report(report, inventory)
    assert result["changed"] == 0, [o for o in result["operations"] if o["status"] != "unchanged"]
    assert [host.main_pid(u) for u in UNITS] == pids
    assert len([c for c in standins.calls(host.record) if c["argv"][:1] == ["pull"]]) == pulls


def test_kill_9_is_restarted_and_the_balancer_keeps_serving(host: Host) -> None:
    unit = UNITS[0]
    pid = host.main_pid(unit)
    host.run(f"kill -9 {pid}")
    assert request(host, "/v1/completions")[0] == 200  # qwen-2 answers meanwhile
    wait_for(f"{unit} back", lambda: host.active(unit) and host.main_pid(unit) not in (0, pid), 30)
    health = "curl -s -m 5 -o /dev/null -w '%{http_code}' http://127.0.0.1:8500/health"
    wait_for("qwen-1 answering", lambda: host.run(health, check=False) == "200", 30)


def test_changing_one_replica_restarts_only_it(host: Host, inventory: Inventory) -> None:
    pids = {u: host.main_pid(u) for u in UNITS}
    replicas = [dict(r) for r in inventory.data["vllm_replicas"]]
    replicas[1]["max_num_seqs"] = 4
    code, _, stderr = apply(inventory, vllm_replicas=replicas)
    assert code == 0, stderr
    assert host.main_pid(UNITS[0]) == pids[UNITS[0]]
    assert host.main_pid(UNITS[1]) != pids[UNITS[1]]
    assert "--max-num-seqs 4" in host.run(f"systemctl cat {UNITS[1]}").replace('"', "")


def test_over_budget_plan_is_refused_with_the_table(host: Host, inventory: Inventory) -> None:
    third = {**REPLICA, "name": "qwen-3", "port": 8502, "gpus": [0], "gpu_memory_utilization": 0.5}
    replicas = [*inventory.data["vllm_replicas"], third]
    done = gpuprov("plan", str(inventory.write(vllm_replicas=replicas)))
    assert done.returncode == 1
    assert "VRAM" in done.stdout and "gpuprov-vllm-qwen-3" in done.stdout
    assert not host.ok("test -e /etc/systemd/system/gpuprov-vllm-qwen-3.service")


def test_old_driver_gets_no_image_that_cannot_run(host: Host, inventory: Inventory) -> None:
    """Driver 570 (CUDA 12.8): no tag of v0.21.0 runs; the plan says why, nothing changes."""
    set_driver(host, GPUS_570)
    try:
        done = gpuprov("plan", str(inventory.write()))
        assert done.returncode == 1
        assert "vLLM image" in done.stdout
        pids = [host.main_pid(u) for u in UNITS]
        code, _, _ = apply(inventory)
        assert code == 1
        assert [host.main_pid(u) for u in UNITS] == pids
    finally:
        set_driver(host, GPUS_580)


def test_pinned_image_is_refused_after_the_pull(host: Host, inventory: Inventory) -> None:
    """A pinned CUDA 13.0 image on driver 570: pulled, then its NVIDIA_REQUIRE_CUDA refused."""
    set_driver(host, GPUS_570)
    try:
        pids = [host.main_pid(u) for u in UNITS]
        code, report, _ = apply(inventory, vllm_image=IMAGE_CUDA13)
        result = host_report(report, inventory)
        rules = {f["rule"] for f in result["findings"]}
        assert "CTR-001" in rules  # the image is present: refused at the gate, before any change
        assert code == 1
        assert [host.main_pid(u) for u in UNITS] == pids
    finally:
        set_driver(host, GPUS_580)


def test_unpulled_image_is_checked_after_the_pull(host: Host, inventory: Inventory) -> None:
    """A pinned CUDA 12.9 image not pulled yet, on driver 570: pulled, checked, never started."""
    image = "vllm/vllm-openai:v0.23.0-cu129"
    set_driver(host, GPUS_570)
    try:
        pids = [host.main_pid(u) for u in UNITS]
        units = host.run(f"cat /etc/systemd/system/{UNITS[0]}")
        code, _, stderr = apply(inventory, vllm_image=image)
        assert code == 1
        assert "unsatisfied condition" in stderr or "CTR-001" in stderr
        calls = [c["argv"] for c in standins.calls(host.record)]
        assert ["pull", image] in calls
        assert not [a for a in calls if a[:1] == ["run"] and image in a]
        assert host.run(f"cat /etc/systemd/system/{UNITS[0]}") == units
        assert [host.main_pid(u) for u in UNITS] == pids
    finally:
        set_driver(host, GPUS_580)


def test_ansible_finds_the_host_converged(host: Host, inventory: Inventory, tmp_path: Path) -> None:
    """The same roles through ansible-playbook: same image, units, env files, nginx, canary."""
    code, _, stderr = apply(inventory)  # back to the base inventory
    assert code == 0, stderr
    ini, extra = ansible_play.ansible_inventory(str(inventory.write()), tmp_path)
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible" / "ansible.cfg")}
    done = subprocess.run(
        ansible_play.playbook(ini, extra),
        capture_output=True,
        text=True,
        cwd=ROOT / "ansible",
        env=env,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:]
    assert ansible_play.recap_changed(done.stdout) == 0, done.stdout[-4000:]


def test_removed_replica_is_stopped_and_leaves_the_balancer(
    host: Host, inventory: Inventory
) -> None:
    replicas = [inventory.data["vllm_replicas"][0]]
    code, _, stderr = apply(inventory, vllm_replicas=replicas)
    assert code == 0, stderr
    assert not host.ok(f"test -e /etc/systemd/system/{UNITS[1]}")
    assert not host.active(UNITS[1])
    assert not host.ok("test -e /etc/gpuprov/vllm/qwen-2.env")  # it held the API key
    assert host.ok("test -e /etc/gpuprov/vllm/qwen-1.env")
    conf = host.run("cat /etc/nginx/conf.d/gpuprov-lb.conf")
    assert "127.0.0.1:8500" in conf and "127.0.0.1:8501" not in conf
    seen = {request(host, "/v1/completions")[1] for _ in range(3)}
    assert seen == {"gpuprov-vllm-qwen-1"}


def test_llama_servers_left_from_an_earlier_apply_are_removed(
    host: Host, inventory: Inventory
) -> None:
    """An earlier apply served a llama.cpp profile here; now only vLLM replicas are planned, so
    the llama_server role does not run, and its `remove` stops the unit and deletes the unit and
    its EnvironmentFile (which may hold a key). The unit is the shape the role writes."""
    host.run(
        "mkdir -p /etc/gpuprov/llama && echo 'LLAMA_API_KEY=old' > /etc/gpuprov/llama/old.env"
        " && chmod 600 /etc/gpuprov/llama/old.env && printf '[Unit]\\nDescription=old\\n"
        "[Service]\\nEnvironmentFile=/etc/gpuprov/llama/old.env\\nExecStart=/bin/sleep infinity\\n"
        "[Install]\\nWantedBy=multi-user.target\\n' > /etc/systemd/system/gpuprov-llama-old.service"
        " && systemctl daemon-reload && systemctl enable --now gpuprov-llama-old.service"
    )
    assert host.active("gpuprov-llama-old.service")
    code, report, stderr = apply(inventory)
    assert code == 0, stderr
    changed = [op["name"] for op in host_report(report, inventory)["operations"]]
    assert "Stop removed profile gpuprov-llama-old.service" in changed, changed
    assert not host.active("gpuprov-llama-old.service")
    assert not host.ok("test -e /etc/systemd/system/gpuprov-llama-old.service")
    assert not host.ok("test -e /etc/gpuprov/llama/old.env")
    assert apply(inventory)[0] == 0
