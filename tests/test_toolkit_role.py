"""The nvidia_container_toolkit role: its install commands, configure script, CDI decision and the
check that runs after it.

NVIDIA's apt repository and a Docker daemon cannot be reached here, so the install and configure
steps are tested by the exact commands they run and with stand-ins, not for real:
- the install commands are compared word for word with NVIDIA's install guide; the key and list
  file commands then run under sh with a stand-in `curl` (real gpg, sed, grep), their paths moved
  under tmp_path;
- gpuprov-ctk-configure.sh runs for real with stand-in `nvidia-ctk` (edits a daemon.json in
  tmp_path as the real one does), `systemctl` (records calls; a docker restart loads that
  daemon.json) and `docker` (lists the loaded runtimes);
- the post-check reads real recorded probe outputs (tests/fixtures/probes/containers/, the
  llamaland `docker info` JSON) and runs the container probes' script here with stand-ins;
- the pyinfra role plans against this machine (@local, nothing executed) from given gate facts,
  and in CDI mode runs for real on it, writing its spec under tmp_path.
"""

from __future__ import annotations

import base64
import copy
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from checks.facts.model import HostFacts, merge
from checks.facts.parsers import containers, nvidia_smi
from provision import toolkit
from tests.conftest import FIXTURES

ROOT = Path(__file__).resolve().parent.parent
ROLE = ROOT / "roles" / "nvidia_container_toolkit"
SCRIPT = ROLE / "files" / "gpuprov-ctk-configure.sh"
REPO = "https://nvidia.github.io/libnvidia-container"
LLAMALAND = FIXTURES / "real" / "docker_info_json__llamaland_fedora41_nvidia-runtime-cdi.json"
CTK_VERSION = FIXTURES / "real" / "nvidia-ctk_version__nct-50_1.12.0.txt"
NO_TOOLKIT = FIXTURES / "captures" / "containers" / "probe_container-toolkit__ci_none.txt"
NO_DAEMON = FIXTURES / "captures" / "containers" / "docker_info_json__ci_no-daemon_28.2.2.txt"
TOOLKIT_INSTALLED = FIXTURES / "probes" / "containers" / "edge_toolkit-probe_installed.json"
SMI = FIXTURES / "real" / "nvsmi_table__triton-on-computecanada_a100-sxm4-40gb_550.144.03.txt"
# The list file NVIDIA serves at stable/deb/nvidia-container-toolkit.list.
NVIDIA_LIST = (
    "deb https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /\n"
    "#deb https://nvidia.github.io/libnvidia-container/experimental/deb/$(ARCH) /\n"
)
NVIDIA_RUNTIME = {"args": [], "path": "nvidia-container-runtime"}

# --- stand-ins ------------------------------------------------------------------------------

NVIDIA_CTK = """\
import json, os, sys

args = sys.argv[1:]
if args == ["--version"]:
    print(open(os.environ["FAKE_CTK_VERSION"]).read(), end="")
elif args[:2] == ["runtime", "configure"] and os.environ.get("FAKE_CTK_FAIL"):
    sys.exit("ERROR[0000] unable to flush config: permission denied")
elif args[:2] == ["runtime", "configure"] and "--runtime=docker" in args:
    path = next(a.split("=", 1)[1] for a in args if a.startswith("--config="))
    config = json.load(open(path)) if os.path.exists(path) else {}
    config.setdefault("runtimes", {})["nvidia"] = {"args": [], "path": "nvidia-container-runtime"}
    with open(path, "w") as f:
        f.write(json.dumps(config, indent=4, sort_keys=True))
    print(f"INFO[0000] Wrote updated config to {path}", file=sys.stderr)
    print("INFO[0000] It is recommended that docker daemon be restarted.", file=sys.stderr)
elif args[:2] == ["cdi", "generate"]:
    path = next(a.split("=", 1)[1] for a in args if a.startswith("--output="))
    with open(path, "w") as f:
        f.write("cdiVersion: 0.5.0\\nkind: nvidia.com/gpu\\ndevices:\\n- name: all\\n")
    print(f"INFO[0000] Generated CDI spec with version 0.5.0", file=sys.stderr)
else:
    sys.exit(f"stand-in nvidia-ctk: unexpected {args}")
"""

SYSTEMCTL = """\
import os, shutil, sys

with open(os.environ["FAKE_CALLS"], "a") as f:
    f.write(" ".join(sys.argv[1:]) + "\\n")
if sys.argv[1:] == ["restart", "docker"] and os.path.exists(os.environ["FAKE_DAEMON_JSON"]):
    shutil.copy(os.environ["FAKE_DAEMON_JSON"], os.environ["FAKE_DOCKER_LOADED"])
"""

DOCKER = """\
import json, os, sys

args = sys.argv[1:]
fmt = args[args.index("--format") + 1] if "--format" in args else ""
if args[:1] != ["info"]:
    sys.exit(f"stand-in docker: unexpected {args}")
if fmt == "{{json .Runtimes}}":
    runtimes = {"io.containerd.runc.v2": {"path": "runc"}, "runc": {"path": "runc"}}
    loaded = os.environ["FAKE_DOCKER_LOADED"]
    if os.path.exists(loaded):
        runtimes.update(json.load(open(loaded)).get("runtimes", {}))
    print(json.dumps(runtimes))
elif fmt == "{{json .}}":
    print(open(os.environ["FAKE_DOCKER_INFO"]).read())
else:
    sys.exit(f"stand-in docker: unexpected {args}")
"""


@dataclass
class Standins:
    """A bin folder of stand-ins and the files they read and write."""

    bin: Path
    calls: Path
    daemon_json: Path
    loaded: Path
    env: dict[str, str]

    def restarts(self) -> list[str]:
        text = self.calls.read_text() if self.calls.exists() else ""
        return [line for line in text.splitlines() if line == "restart docker"]


def write_tool(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(0o755)


@pytest.fixture(name="s")
def standins_fixture(tmp_path: Path) -> Standins:
    """nvidia-ctk, systemctl and docker stand-ins; PATH holds only them and cksum."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for name, body in (("nvidia-ctk", NVIDIA_CTK), ("systemctl", SYSTEMCTL), ("docker", DOCKER)):
        write_tool(folder, name, body)
    (folder / "cksum").symlink_to("/usr/bin/cksum")
    version = tmp_path / "ctk-version.txt"
    version.write_text("".join(CTK_VERSION.read_text().splitlines(keepends=True)[2:4]))
    paths = {
        "FAKE_CALLS": tmp_path / "systemctl-calls",
        "FAKE_DAEMON_JSON": tmp_path / "etc-docker" / "daemon.json",
        "FAKE_DOCKER_LOADED": tmp_path / "daemon-loaded.json",
        "FAKE_DOCKER_INFO": LLAMALAND,
        "FAKE_CTK_VERSION": version,
    }
    paths["FAKE_DAEMON_JSON"].parent.mkdir()
    env = {"PATH": str(folder), **{k: str(v) for k, v in paths.items()}}
    return Standins(
        folder, paths["FAKE_CALLS"], paths["FAKE_DAEMON_JSON"], paths["FAKE_DOCKER_LOADED"], env
    )


def configure(s: Standins, **extra: str) -> subprocess.CompletedProcess[str]:
    """Run the real configure script as the roles run it, against the stand-ins."""
    return subprocess.run(
        ["/bin/sh", str(SCRIPT), "--config", str(s.daemon_json)],
        capture_output=True,
        text=True,
        env={**s.env, **extra},
        timeout=60,
        check=False,
    )


# --- install --------------------------------------------------------------------------------

KEYRING = "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
SOURCES = "/etc/apt/sources.list.d/nvidia-container-toolkit.list"


def test_install_commands_are_nvidias_apt_steps() -> None:
    assert toolkit.install_commands(REPO) == [
        "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y"
        " --no-install-recommends curl gnupg2",
        f"curl -fsSL {REPO}/gpgkey | gpg --batch --yes --dearmor -o {KEYRING}",
        f"curl -fsSL {REPO}/stable/deb/nvidia-container-toolkit.list"
        f" | sed 's#deb https://#deb [signed-by={KEYRING}] https://#g' > {SOURCES}"
        f" && grep -q '^deb \\[signed-by={KEYRING}] ' {SOURCES}"
        f" || {{ rm -f {SOURCES}; echo 'no signed NVIDIA container toolkit source' >&2; exit 1; }}",
        "apt-get update",
        "DEBIAN_FRONTEND=noninteractive apt-get install -y nvidia-container-toolkit",
    ]
    assert toolkit.install_commands(REPO + "/") == toolkit.install_commands(REPO)


def test_a_pinned_version_pins_nvidias_four_packages() -> None:
    assert toolkit.package_commands("1.18.0-1") == [
        "apt-get update",
        "DEBIAN_FRONTEND=noninteractive apt-get install -y nvidia-container-toolkit=1.18.0-1"
        " nvidia-container-toolkit-base=1.18.0-1 libnvidia-container-tools=1.18.0-1"
        " libnvidia-container1=1.18.0-1",
    ]
    with pytest.raises(toolkit.ToolkitError, match="not an apt version"):
        toolkit.package_commands("1.18; rm -rf /")


def test_a_mirror_url_is_quoted() -> None:
    key = toolkit.key_command("https://mirror.example/nvidia it's")
    assert key.startswith("curl -fsSL 'https://mirror.example/nvidia it'\"'\"'s/gpgkey' | gpg")


def moved(command: str, tmp_path: Path) -> str:
    """`command` with the keyring and the list file under tmp_path."""
    return command.replace(KEYRING, str(tmp_path / "keyring.gpg")).replace(
        SOURCES, str(tmp_path / "toolkit.list")
    )


def fake_curl(tmp_path: Path, body: str, status: int = 0) -> dict[str, str]:
    """PATH with a `curl` that prints `body` (bytes as latin-1) and exits `status`."""
    folder = tmp_path / "curl-bin"
    folder.mkdir(exist_ok=True)
    (tmp_path / "served").write_text(body, encoding="latin-1")
    write_tool(
        folder,
        "curl",
        f"import sys\nsys.stdout.buffer.write(open({str(tmp_path / 'served')!r}, 'rb').read())\n"
        f"sys.exit({status})\n",
    )
    return {"PATH": f"{folder}:/usr/bin:/bin"}


def sh(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/sh", "-c", command], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def test_key_command_dearmors_the_downloaded_key(tmp_path: Path) -> None:
    payload = bytes(range(256)) * 4
    armored = (
        "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n"
        + base64.encodebytes(payload).decode()
        + "-----END PGP PUBLIC KEY BLOCK-----\n"
    )
    done = sh(moved(toolkit.key_command(REPO), tmp_path), fake_curl(tmp_path, armored))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "keyring.gpg").read_bytes() == payload


def test_key_command_fails_when_the_download_fails(tmp_path: Path) -> None:
    done = sh(moved(toolkit.key_command(REPO), tmp_path), fake_curl(tmp_path, "", status=22))
    assert done.returncode != 0


def test_source_command_adds_signed_by(tmp_path: Path) -> None:
    done = sh(moved(toolkit.source_command(REPO), tmp_path), fake_curl(tmp_path, NVIDIA_LIST))
    assert done.returncode == 0, done.stderr
    keyring = tmp_path / "keyring.gpg"
    assert (tmp_path / "toolkit.list").read_text().splitlines() == [
        f"deb [signed-by={keyring}] {REPO}/stable/deb/$(ARCH) /",
        f"#deb [signed-by={keyring}] {REPO}/experimental/deb/$(ARCH) /",
    ]


@pytest.mark.parametrize(
    ("body", "status"),
    [
        pytest.param("", 22, id="download-failed"),
        pytest.param("<html>404</html>\n", 0, id="not-a-list"),
        pytest.param("deb http://mirror.example/deb/$(ARCH) /\n", 0, id="no-https-line"),
    ],
)
def test_source_command_leaves_no_unsigned_list(tmp_path: Path, body: str, status: int) -> None:
    done = sh(moved(toolkit.source_command(REPO), tmp_path), fake_curl(tmp_path, body, status))
    assert done.returncode != 0
    assert "no signed NVIDIA container toolkit source" in done.stderr
    assert not (tmp_path / "toolkit.list").exists()


# --- the configure script -------------------------------------------------------------------


def test_first_run_configures_and_restarts_once_second_run_does_nothing(s: Standins) -> None:
    s.daemon_json.write_text(json.dumps({"log-driver": "journald"}))
    first = configure(s)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[-1] == "changed"
    assert json.loads(s.daemon_json.read_text()) == {
        "log-driver": "journald",
        "runtimes": {"nvidia": NVIDIA_RUNTIME},
    }
    assert s.restarts() == ["restart docker"]

    second = configure(s)
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines()[-1] == "unchanged"
    assert s.restarts() == ["restart docker"]


def test_a_missing_daemon_json_is_created(s: Standins) -> None:
    done = configure(s)
    assert done.stdout.splitlines()[-1] == "changed"
    assert json.loads(s.daemon_json.read_text()) == {"runtimes": {"nvidia": NVIDIA_RUNTIME}}
    assert s.restarts() == ["restart docker"]


def test_failing_nvidia_ctk_fails_without_restart(s: Standins) -> None:
    s.daemon_json.write_text("{}")
    done = configure(s, FAKE_CTK_FAIL="1")
    assert done.returncode == 1
    assert "permission denied" in done.stderr
    assert "nvidia-ctk runtime configure failed; docker not restarted" in done.stderr
    assert "changed" not in done.stdout
    assert not s.calls.exists()
    assert s.daemon_json.read_text() == "{}"


def test_a_daemon_running_without_the_configured_runtime_is_restarted(s: Standins) -> None:
    """daemon.json already has the runtime, but Docker was not restarted since."""
    s.daemon_json.write_text(json.dumps({"runtimes": {"nvidia": NVIDIA_RUNTIME}}, indent=4))
    before = s.daemon_json.read_text()
    s.loaded.write_text("{}")
    done = configure(s)
    assert s.daemon_json.read_text() == before
    assert done.stdout.splitlines()[-1] == "changed"
    assert s.restarts() == ["restart docker"]
    assert configure(s).stdout.splitlines()[-1] == "unchanged"
    assert s.restarts() == ["restart docker"]


def test_without_docker_the_config_is_written_and_nothing_restarted(s: Standins) -> None:
    (s.bin / "docker").unlink()
    done = configure(s)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "changed"
    assert "docker is not installed" in done.stderr
    assert not s.calls.exists()
    assert configure(s).stdout.splitlines()[-1] == "unchanged"


# --- decisions ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("present", "recorded", "driver", "action"),
    [
        pytest.param(False, None, "550.144.03", "generate", id="missing"),
        pytest.param(False, None, None, "generate", id="missing-driver-unknown"),
        pytest.param(True, "550.144.03\n", "570.86.15", "regenerate", id="driver-changed"),
        pytest.param(True, None, "570.86.15", "regenerate", id="driver-not-recorded"),
        pytest.param(True, "570.86.15\n", "570.86.15", "", id="unchanged"),
        pytest.param(True, "550.144.03\n", None, "", id="driver-unknown"),
    ],
)
def test_cdi_action(present: bool, recorded: str | None, driver: str | None, action: str) -> None:
    assert toolkit.cdi_action(present, recorded, driver) == action


def test_cdi_commands_write_the_spec_and_record_the_driver(s: Standins, tmp_path: Path) -> None:
    spec = tmp_path / "cdi" / "nvidia.yaml"
    for command in toolkit.cdi_commands(str(spec), "570.86.15"):
        done = sh(command, {**s.env, "PATH": f"{s.bin}:/usr/bin:/bin"})
        assert done.returncode == 0, done.stderr
    assert spec.read_text().startswith("cdiVersion:")
    recorded = (tmp_path / "cdi" / "nvidia.yaml.driver").read_text()
    assert recorded == "570.86.15\n"
    assert toolkit.cdi_action(True, recorded, "570.86.15") == ""
    assert toolkit.cdi_action(True, recorded, "575.51.03") == "regenerate"


def test_docker_runtimes_from_the_probe() -> None:
    facts = containers.parse_docker_info_json(LLAMALAND.read_text())
    assert toolkit.docker_has_nvidia(facts) is True
    without = containers.parse_docker_info_json(without_nvidia(LLAMALAND.read_text()))
    assert toolkit.docker_has_nvidia(without) is False
    assert (
        toolkit.docker_has_nvidia(containers.parse_docker_info_json(NO_DAEMON.read_text())) is None
    )


@pytest.mark.parametrize(
    ("text", "has"),
    [
        pytest.param(None, False, id="no-file"),
        pytest.param("", False, id="empty"),
        pytest.param('{"log-driver": "journald"}', False, id="other-settings"),
        pytest.param('{"runtimes": {"nvidia": {"path": "nvidia-container-runtime"}}}', True),
        pytest.param("{broken", False, id="not-json"),
        pytest.param("[]", False, id="not-an-object"),
    ],
)
def test_daemon_config_has_nvidia(text: str | None, has: bool) -> None:
    assert toolkit.daemon_config_has_nvidia(text) is has


# --- the post-check -------------------------------------------------------------------------


def without_nvidia(docker_info: str, keep_cdi: bool = True) -> str:
    """The recorded `docker info` JSON without the nvidia runtime (and, unless `keep_cdi`, without
    its CDI devices)."""
    info = json.loads(docker_info)
    del info["Runtimes"]["nvidia"]
    if not keep_cdi:
        info["DiscoveredDevices"] = []
    return json.dumps(info)


def gate_facts() -> HostFacts:
    """What the gate saw before the role ran: a real A100 nvidia-smi table, no toolkit."""
    facts = nvidia_smi.parse_table(SMI.read_text())
    merge(facts, containers.parse_toolkit_probe(NO_TOOLKIT.read_text()))
    merge(
        facts,
        containers.parse_docker_info_json(without_nvidia(LLAMALAND.read_text(), keep_cdi=False)),
    )
    return facts


def probed(docker_info: str, toolkit_probe: str) -> HostFacts:
    facts = containers.parse_docker_info_json(docker_info)
    return merge(facts, containers.parse_toolkit_probe(toolkit_probe))


def installed_probe() -> str:
    return "\n".join(json.loads(TOOLKIT_INSTALLED.read_text())["output"]) + "\n"


def test_gate_facts_fire_ctr004_before() -> None:
    """The premise: the gate's facts are what CTR-004 catches."""
    base = gate_facts()
    assert base.driver.version == "550.144.03"
    found = toolkit.problems(base, copy.deepcopy(base), "docker")
    assert [f.split(" ", 1)[0] for f in found] == ["CTR-004"]


def test_post_check_passes_with_the_nvidia_runtime() -> None:
    fresh = probed(LLAMALAND.read_text(), installed_probe())
    assert toolkit.problems(gate_facts(), fresh, "docker") == []
    assert toolkit.problems(gate_facts(), fresh, "cdi") == []


def test_post_check_fails_without_the_nvidia_runtime() -> None:
    fresh = probed(without_nvidia(LLAMALAND.read_text()), installed_probe())
    found = toolkit.problems(gate_facts(), fresh, "docker")
    assert len(found) == 1
    assert found[0].startswith("CTR-005 Docker is not configured with the nvidia runtime: ")
    assert "io.containerd.runc.v2, runc" in found[0]
    assert "nvidia-ctk runtime configure --runtime=docker" in found[0]
    message = toolkit.failure_message("gpu1", found)
    assert message.startswith("gpu1: the NVIDIA Container Toolkit is set up but containers")
    assert toolkit.problems(gate_facts(), fresh, "cdi") == []


def test_post_check_fails_when_the_toolkit_is_still_missing() -> None:
    fresh = probed(without_nvidia(LLAMALAND.read_text(), keep_cdi=False), NO_TOOLKIT.read_text())
    for mode in ("docker", "cdi"):
        found = toolkit.problems(gate_facts(), fresh, mode)
        assert [f.split(" ", 1)[0] for f in found] == ["CTR-004"], mode
        assert "NVIDIA Container Toolkit is not" in found[0]


def test_post_check_fails_when_docker_does_not_answer() -> None:
    fresh = probed(NO_DAEMON.read_text(), installed_probe())
    found = toolkit.problems(gate_facts(), fresh, "docker")
    assert found == [
        "Docker does not answer: Cannot connect to the Docker daemon at"
        " unix:///var/run/docker.sock. Is the docker daemon running?"
    ]


def test_merged_takes_containers_from_the_probes_and_the_gpus_from_the_gate() -> None:
    base = gate_facts()
    fresh = probed(LLAMALAND.read_text(), installed_probe())
    facts = toolkit.merged(base, fresh)
    assert facts.containers.docker is not None
    assert "nvidia" in (facts.containers.docker.runtimes or [])
    assert facts.containers.toolkit_version == "1.17.8"
    assert facts.driver.version == "550.144.03" and facts.gpus == base.gpus
    assert base.containers.toolkit_version is None  # the gate's facts are left alone


def run_probe_script(s: Standins) -> str:
    done = sh(toolkit.PROBE_SCRIPT, {**s.env, "PATH": f"{s.bin}:/usr/bin:/bin"})
    return done.stdout + done.stderr


def test_the_probe_script_runs_here_with_stand_ins(s: Standins) -> None:
    """The container probes' own commands, framed as on a host, read through the parsers."""
    fresh = toolkit.fresh_facts(run_probe_script(s), "here")
    docker = fresh.containers.docker
    assert docker is not None and docker.server_version == "28.2.2"
    assert fresh.containers.toolkit_version == "1.12.0"
    assert toolkit.problems(gate_facts(), fresh, "docker") == []
    info = s.bin.parent / "info-without-nvidia.json"
    info.write_text(without_nvidia(LLAMALAND.read_text()))
    s.env["FAKE_DOCKER_INFO"] = str(info)
    fresh = toolkit.fresh_facts(run_probe_script(s), "here")
    assert [f.split(" ", 1)[0] for f in toolkit.problems(gate_facts(), fresh, "docker")] == [
        "CTR-005"
    ]


# --- the pyinfra role ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def role() -> ModuleType:
    name = "gpuprov_roles.nvidia_container_toolkit"
    if name in sys.modules:
        return sys.modules[name]
    path = ROLE / "tasks" / "nvidia_container_toolkit.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def local_state() -> Any:
    """A connected pyinfra state with this machine (@local) as its only host."""
    from pyinfra.api.config import Config
    from pyinfra.api.connect import connect_all
    from pyinfra.api.inventory import Inventory
    from pyinfra.api.state import State

    state = State(Inventory((["@local"], {})), Config())  # type: ignore[no-untyped-call]
    connect_all(state)
    return state


@pytest.fixture
def local() -> Iterator[Any]:
    from pyinfra.api.connect import disconnect_all

    state = local_state()
    yield state
    disconnect_all(state)


def host_plan(facts: HostFacts, **variables: Any) -> Any:
    from provision import stack
    from provision.gate import HostGate
    from provision.hostplan import HostPlan

    return HostPlan(
        "@local", stack.from_data({}), stack.variables(variables), HostGate("@local", facts)
    )


def planned(state: Any, deploy: Any, *args: Any) -> list[tuple[str, list[str]]]:
    """(operation name, commands) for every operation `deploy` adds on @local."""
    from pyinfra.api.command import StringCommand
    from pyinfra.api.deploy import add_deploy
    from pyinfra.context import ctx_host, ctx_state

    add_deploy(state, deploy, *args)
    host = state.inventory.get_host("@local")
    out = []
    for op_hash in state.get_op_order():
        data = state.ops[host].get(op_hash)
        if data is None:
            continue
        name = sorted(state.get_op_meta(op_hash).names)[0].rsplit(" | ", 1)[-1]
        with ctx_state.use(state), ctx_host.use(host):
            commands = [
                c.get_raw_value() if isinstance(c, StringCommand) else type(c).__name__
                for c in data.command_generator()
            ]
        out.append((name, commands))
    return out


def with_toolkit(facts: HostFacts, runtimes: bool) -> HostFacts:
    """`facts` as the gate sees them once the toolkit is installed (and Docker configured)."""
    done = copy.deepcopy(facts)
    done.containers = probed(
        LLAMALAND.read_text() if runtimes else without_nvidia(LLAMALAND.read_text()),
        installed_probe(),
    ).containers
    return done


def test_role_plans_install_configure_and_check(local: Any, role: ModuleType) -> None:
    if not Path("/usr/bin/apt-get").exists() or Path("/usr/bin/nvidia-ctk").exists():
        pytest.skip("plans an install: needs apt-get and no nvidia-ctk on this machine")
    ops = planned(local, role.nvidia_container_toolkit, host_plan(gate_facts()))
    assert [name for name, _ in ops] == [
        "Add NVIDIA's container toolkit apt repository",
        "Install the NVIDIA Container Toolkit",
        "Install the Docker configuration script",
        "Register the nvidia runtime with Docker",
        "Check that containers reach the GPU (CTR-004, CTR-005)",
    ]
    assert ops[0][1] + ops[1][1] == toolkit.install_commands(REPO)
    assert ops[3][1] == [f"{toolkit.SCRIPT} --config /etc/docker/daemon.json"]
    assert ops[4][1] == ["FunctionCommand"]


def test_role_on_a_converged_host_adds_nothing(local: Any, role: ModuleType) -> None:
    facts = with_toolkit(gate_facts(), runtimes=True)
    assert planned(local, role.nvidia_container_toolkit, host_plan(facts)) == []


def test_role_configures_docker_when_only_the_runtime_is_missing(
    local: Any, role: ModuleType
) -> None:
    facts = with_toolkit(gate_facts(), runtimes=False)
    plan = host_plan(facts, nvidia_container_toolkit_docker_config="/srv/docker/daemon.json")
    ops = planned(local, role.nvidia_container_toolkit, plan)
    assert [name for name, _ in ops][1:] == [
        "Register the nvidia runtime with Docker",
        "Check that containers reach the GPU (CTR-004, CTR-005)",
    ]
    assert ops[1][1] == [f"{toolkit.SCRIPT} --config /srv/docker/daemon.json"]


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        pytest.param(
            {"nvidia_container_toolkit_install": False},
            "@local: nvidia-ctk is not installed and nvidia_container_toolkit_install is false",
            id="install-off",
        ),
        pytest.param(
            {}, "@local: nvidia-ctk is not installed and @local has no apt-get", id="no-apt"
        ),
        pytest.param(
            {"nvidia_container_toolkit_version": "latest"},
            "@local: nvidia_container_toolkit_version: not an apt version: 'latest'",
            id="bad-version",
        ),
    ],
)
def test_role_refuses_before_changing_anything(
    local: Any,
    role: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    variables: dict[str, Any],
    message: str,
) -> None:
    """No nvidia-ctk on PATH, and nothing the role may do about it: the host fails, saying why."""
    from pyinfra.api.exceptions import PyinfraError

    if Path("/usr/bin/nvidia-ctk").exists() or not Path("/usr/bin/apt-get").exists():
        pytest.skip("needs apt-get and no nvidia-ctk on this machine")
    shell = tmp_path / "sh-only"
    shell.mkdir()
    (shell / "sh").symlink_to("/bin/sh")
    monkeypatch.setenv("PATH", f"{shell}:/usr/bin" if variables else str(shell))
    with pytest.raises(PyinfraError, match="No hosts remaining"):  # @local was the only host
        planned(local, role.nvidia_container_toolkit, host_plan(gate_facts(), **variables))
    assert [h.name for h in local.failed_hosts] == ["@local"]
    assert not local.get_op_order()
    assert message in caplog.text


def test_role_in_cdi_mode_runs_here_and_reruns_without_change(
    local: Any, role: ModuleType, s: Standins, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CDI mode, executed for real on this machine: the spec and its .driver go to tmp_path."""
    from pyinfra.api.connect import disconnect_all
    from pyinfra.api.operations import run_ops

    for key, value in s.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PATH", f"{s.bin}:/usr/bin:/bin")
    spec = tmp_path / "cdi" / "nvidia.yaml"
    facts = with_toolkit(gate_facts(), runtimes=True)
    facts.containers.cdi_specs = []
    plan = host_plan(
        facts, nvidia_container_toolkit_mode="cdi", nvidia_container_toolkit_cdi_spec=str(spec)
    )
    ops = planned(local, role.nvidia_container_toolkit, plan)
    assert [name for name, _ in ops] == [
        f"Generate the CDI spec {spec}",
        "Check that containers reach the GPU (CTR-004)",
    ]
    run_ops(local)
    assert not local.failed_hosts
    assert spec.read_text().startswith("cdiVersion:")
    assert (tmp_path / "cdi" / "nvidia.yaml.driver").read_text() == "550.144.03\n"

    again = local_state()
    try:
        assert planned(again, role.nvidia_container_toolkit, plan) == []
        newer = copy.deepcopy(plan)
        newer.gate.facts.driver.version = "570.86.15"
        ops = planned(again, role.nvidia_container_toolkit, newer)
        assert ops[0][0] == f"Regenerate the CDI spec {spec} for driver 570.86.15"
    finally:
        disconnect_all(again)


def test_recheck_through_pyinfra_fails_the_host(
    local: Any,
    role: ModuleType,
    s: Standins,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The check as a python.call operation, run by pyinfra here with stand-ins on PATH."""
    from pyinfra.api.deploy import deploy
    from pyinfra.api.exceptions import PyinfraError
    from pyinfra.api.operations import run_ops
    from pyinfra.operations import python

    info = s.bin.parent / "info-without-nvidia.json"
    info.write_text(without_nvidia(LLAMALAND.read_text()))
    for key, value in {**s.env, "FAKE_DOCKER_INFO": str(info)}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PATH", f"{s.bin}:/usr/bin:/bin")

    @deploy("check only")
    def check_only() -> None:
        python.call(name="check", function=role.recheck, base=gate_facts(), mode="docker")

    planned(local, check_only)
    with pytest.raises(PyinfraError, match="No hosts remaining"):
        run_ops(local)
    assert [h.name for h in local.failed_hosts] == ["@local"]
    assert "@local: the NVIDIA Container Toolkit is set up but containers" in caplog.text
    assert "CTR-005 Docker is not configured with the nvidia runtime" in caplog.text


# --- Ansible --------------------------------------------------------------------------------

PLAY = """
- hosts: all
  gather_facts: false
  roles: [nvidia_container_toolkit]
"""


def ansible(
    s: Standins, tmp_path: Path, env: dict[str, str] | None = None, **extra: str
) -> subprocess.CompletedProcess[str]:
    """The role under ansible-playbook on this machine (connection local), with the stand-ins."""
    (tmp_path / "hosts.ini").write_text(
        f"[all]\nhere ansible_connection=local ansible_python_interpreter={sys.executable}\n"
    )
    (tmp_path / "play.yml").write_text(PLAY)
    variables = {
        "_nvidia_container_toolkit_script": str(tmp_path / "lib" / "gpuprov-ctk-configure.sh"),
        "nvidia_container_toolkit_docker_config": str(s.daemon_json),
        "nvidia_container_toolkit_cdi_spec": str(tmp_path / "cdi" / "nvidia.yaml"),
        **extra,
    }
    environ = {
        **os.environ,
        **s.env,
        **(env or {}),
        "PATH": f"{s.bin}:{Path(sys.executable).parent}:/usr/bin:/bin",
        "ANSIBLE_CONFIG": str(ROOT / "ansible" / "ansible.cfg"),
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
    }
    playbook = str(Path(sys.executable).parent / "ansible-playbook")
    return subprocess.run(
        [playbook, "-i", str(tmp_path / "hosts.ini"), "-e", json.dumps(variables), "play.yml"],
        capture_output=True,
        text=True,
        env=environ,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )


RENDER = """
- hosts: all
  gather_facts: false
  tasks:
    - ansible.builtin.include_vars: {file: "%s"}
    - ansible.builtin.copy:
        dest: "{{ out }}"
        content: "{{ {'packages': _nvidia_container_toolkit_packages,
                      'key': nvidia_container_toolkit_repo | nvidia_container_toolkit_key_command,
                      'source': nvidia_container_toolkit_repo
                                | nvidia_container_toolkit_source_command} | to_json }}"
""" % (ROLE / "vars" / "main.yml")


@pytest.mark.parametrize("version", ["", "1.18.0-1"])
def test_ansible_renders_the_install_steps_pyinfra_runs(tmp_path: Path, version: str) -> None:
    """The role's filters and package list, rendered by Ansible, against provision.toolkit."""
    (tmp_path / "hosts.ini").write_text(
        f"[all]\nhere ansible_connection=local ansible_python_interpreter={sys.executable}\n"
    )
    (tmp_path / "render.yml").write_text(RENDER)
    out = tmp_path / "rendered.json"
    variables = {
        "out": str(out),
        "nvidia_container_toolkit_repo": "https://mirror.example/nvidia it's/",
        "nvidia_container_toolkit_version": version,
    }
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible" / "ansible.cfg"),
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
    }
    playbook = str(Path(sys.executable).parent / "ansible-playbook")
    done = subprocess.run(
        [playbook, "-i", "hosts.ini", "-e", json.dumps(variables), "render.yml"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    rendered = json.loads(out.read_text())
    repo = "https://mirror.example/nvidia it's/"
    assert rendered["key"] == toolkit.key_command(repo)
    assert rendered["source"] == toolkit.source_command(repo)
    install = toolkit.package_commands(version)[-1]
    assert install == "DEBIAN_FRONTEND=noninteractive apt-get install -y " + " ".join(
        rendered["packages"]
    )


def changed(done: subprocess.CompletedProcess[str]) -> int:
    match = re.search(r"here\s*:\s*ok=\d+\s+changed=(\d+)", done.stdout)
    assert match, done.stdout[-3000:]
    return int(match.group(1))


def test_ansible_configures_docker_once(s: Standins, tmp_path: Path) -> None:
    first = ansible(s, tmp_path)
    assert first.returncode == 0, first.stdout[-3000:]
    assert json.loads(s.daemon_json.read_text())["runtimes"]["nvidia"] == NVIDIA_RUNTIME
    assert s.restarts() == ["restart docker"]
    second = ansible(s, tmp_path)
    assert second.returncode == 0, second.stdout[-3000:]
    assert changed(second) == 0
    assert s.restarts() == ["restart docker"]


def test_ansible_stops_without_restart_when_nvidia_ctk_fails(s: Standins, tmp_path: Path) -> None:
    done = ansible(s, tmp_path, env={"FAKE_CTK_FAIL": "1"})
    assert done.returncode != 0
    assert "nvidia-ctk runtime configure failed" in done.stdout
    calls = s.calls.read_text().splitlines() if s.calls.exists() else []
    assert [c for c in calls if not c.startswith("show ")] == []  # the gate's probe only reads


def test_ansible_check_fails_when_docker_lacks_the_runtime(s: Standins, tmp_path: Path) -> None:
    """A daemon that does not list the runtime after the script ran fails the final check."""
    write_tool(s.bin, "systemctl", "pass\n")  # restarts that load nothing
    done = ansible(s, tmp_path)
    assert done.returncode != 0
    assert "docker info does not list the nvidia runtime (CTR-005)" in done.stdout


def test_ansible_cdi_generates_once_per_driver(s: Standins, tmp_path: Path) -> None:
    smi = tmp_path / "driver.txt"
    smi.write_text("550.144.03\n")
    write_tool(s.bin, "nvidia-smi", f"print(open({str(smi)!r}).read(), end='')\n")
    first = ansible(s, tmp_path, nvidia_container_toolkit_mode="cdi")
    assert first.returncode == 0, first.stdout[-3000:]
    assert (tmp_path / "cdi" / "nvidia.yaml.driver").read_text() == "550.144.03\n"
    assert changed(ansible(s, tmp_path, nvidia_container_toolkit_mode="cdi")) == 0
    smi.write_text("570.86.15\n")
    third = ansible(s, tmp_path, nvidia_container_toolkit_mode="cdi")
    assert changed(third) == 2
    assert (tmp_path / "cdi" / "nvidia.yaml.driver").read_text() == "570.86.15\n"
