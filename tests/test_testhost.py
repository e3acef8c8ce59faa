"""Test hosts: the commands they are made with, and a real one reached over SSH and by pyinfra."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from pyinfra.api import Config, Inventory, State
from pyinfra.api.connect import connect_all, disconnect_all
from pyinfra.connectors.ssh import connector_data_meta
from pyinfra.facts.server import Os
from typer.testing import CliRunner

from checks import packaged
from provision.testhost import hosts, image, machine, network, podman, state
from provision.testhost.cli import app

# The e2e fixtures, for this module outside tests/e2e/.
from tests.e2e.conftest import MakeHost
from tests.e2e.conftest import testhost_factory_fixture as testhost_factory_fixture
from tests.e2e.conftest import testhost_fixture as testhost_fixture

DEB822 = """\
Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian/
Suites: bookworm bookworm-updates
Components: main

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
"""

ONE_LINE = """\
# deb http://commented.example/debian bookworm main
deb [arch=amd64 signed-by=/k.gpg] http://list.example/debian bookworm main
deb http://list.example/debian-security bookworm-security main
"""

IP_LINK = """\
1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT
4: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1400 qdisc pfifo_fast state UP mode DEFAULT
5: gph1@if2: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP mode DEFAULT
9: gph17@if2: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP mode DEFAULT
"""


def host(index: int = 3) -> hosts.TestHost:
    return hosts.TestHost(
        name="web",
        index=index,
        address=network.address(index),
        container="gp-web",
        netns="gp-web",
        ssh_key=Path("/state/id_ed25519"),
        known_hosts=Path("/state/known_hosts"),
    )


def test_mirror_from_deb822_sources_is_the_one_serving_bookworm() -> None:
    assert image.mirror_from_sources([DEB822], []) == "http://mirror.example/debian"


def test_mirror_from_sources_list_skips_comments_and_options() -> None:
    assert image.mirror_from_sources([], [ONE_LINE]) == "http://list.example/debian"


def test_disabled_stanzas_are_skipped_and_the_fallback_is_deb_debian_org() -> None:
    disabled = DEB822.replace("Components: main\n", "Components: main\nEnabled: no\n", 1)
    assert image.mirror_from_sources([disabled], ["# nothing\n"]) == image.DEFAULT_MIRROR
    assert image.DEFAULT_MIRROR == "http://deb.debian.org/debian"


def test_image_tag_names_the_package_list_and_the_recipe() -> None:
    tag = image.image_tag()
    assert len(tag) == 12 and int(tag, 16) >= 0
    assert image.image_tag() == tag
    assert image.image_tag(list(reversed(image.PACKAGES))) == tag
    assert image.image_tag([*image.PACKAGES, "vim"]) != tag
    assert image.image_tag(recipe=image.RECIPE_VERSION + 1) != tag
    assert image.image_ref() == f"localhost/gpuprov-testhost:{tag}"


def test_debootstrap_command() -> None:
    command = image.debootstrap_command(Path("/b/root"), "http://m/debian", ["systemd", "git"])
    assert command == [
        "debootstrap",
        "--variant=minbase",
        "--include=systemd,git",
        "bookworm",
        "/b/root",
        "http://m/debian",
    ]
    for package in ("systemd-sysv", "openssh-server", "python3", "ccache", "nginx"):
        assert package in image.PACKAGES


def test_netns_commands_put_eth0_inside_with_the_host_address() -> None:
    commands = network.netns_commands("web", 3)
    assert commands[0] == ["ip", "netns", "add", "gp-web"]
    assert [
        "ip",
        "link",
        "add",
        "gph3",
        "type",
        "veth",
        "peer",
        "name",
        "eth0",
        "netns",
        "gp-web",
    ] in commands
    assert ["ip", "addr", "add", "10.213.3.1/24", "dev", "gph3"] in commands
    assert ["ip", "-n", "gp-web", "addr", "add", "10.213.3.2/24", "dev", "eth0"] in commands
    assert ["ip", "-n", "gp-web", "link", "set", "lo", "up"] in commands
    # No link-local IPv6: nothing listens beyond loopback and 10.213.x.
    assert ["ip", "-n", "gp-web", "link", "set", "eth0", "addrgenmode", "none"] in commands


def test_run_command_boots_systemd_in_the_namespace_with_our_key() -> None:
    command = podman.run_command(
        "web", "img:1", Path("/s/id_ed25519.pub"), [("/s/ccache", "/var/cache/gpuprov/ccache")]
    )
    assert command[:3] == ["podman", "run", "-d"]
    assert command[-2:] == ["img:1", "/lib/systemd/systemd"]
    text = " ".join(command)
    for part in (
        "--name gp-web",
        "--hostname web",
        "--network ns:/run/netns/gp-web",
        "--systemd=always",
        "-v /s/id_ed25519.pub:/root/.ssh/authorized_keys:ro",
        "-v /s/ccache:/var/cache/gpuprov/ccache",
    ):
        assert part in text


def test_podman_config_carries_the_two_fixes(tmp_path: Path) -> None:
    conf = packaged.toml(state.containers_conf_text())
    assert conf["engine"]["runtime"] == "runc"
    assert conf["containers"]["default_ulimits"] == ["nofile=20000:20000", "nproc=32768:32768"]
    paths = state.Paths(tmp_path)
    storage = packaged.toml(state.storage_conf_text(paths))["storage"]
    assert storage["graphroot"] == str(tmp_path / "storage")
    assert storage["runroot"].startswith("/run/")
    env = podman.podman_env(paths, {"PATH": "/bin"})
    assert env["CONTAINERS_CONF"] == str(tmp_path / "containers.conf")
    assert env["CONTAINERS_STORAGE_CONF"] == str(tmp_path / "storage.conf")


def test_indexes() -> None:
    assert network.veth_indexes(IP_LINK) == {1, 17}
    assert network.pick_index({1, 2, 4}) == 3
    with pytest.raises(machine.TestHostError, match="slots"):
        network.pick_index(range(1, network.MAX_INDEX + 1))


def test_names_and_volumes_are_checked() -> None:
    assert hosts.check_name("e2e-1") == "e2e-1"
    for bad in ("", "E2E", "a_b", "-a", "a" * 33, "a;b"):
        with pytest.raises(machine.TestHostError, match="name"):
            hosts.check_name(bad)
    assert hosts.parse_volume("/a:/b") == ("/a", "/b")
    assert hosts.parse_volume("rel:/b")[0] == str(Path("rel").absolute())
    for bad in ("/a", "/a:b", ":/b", "/a:/b:ro"):
        with pytest.raises(machine.TestHostError, match="volume"):
            hosts.parse_volume(bad)


def test_state_dir() -> None:
    assert state.state_dir({"GPUPROV_TESTHOST_DIR": "/x/y"}) == Path("/x/y")
    assert state.state_dir({}) == Path.home() / ".cache/gpuprov/testhosts"


def test_pyinfra_host_data_uses_the_ssh_connectors_keys() -> None:
    name, data = hosts.pyinfra_host(host())
    assert name == "10.213.3.2"
    assert data == {
        "ssh_user": "root",
        "ssh_key": "/state/id_ed25519",
        "ssh_known_hosts_file": "/state/known_hosts",
        "ssh_strict_host_key_checking": "accept-new",
    }
    assert set(data) <= set(connector_data_meta)


def test_ssh_command_uses_only_our_key_and_known_hosts() -> None:
    command = hosts.ssh_command(host(), "systemctl is-system-running")
    assert command[0] == "ssh" and command[-2:] == [
        "root@10.213.3.2",
        "systemctl is-system-running",
    ]
    text = " ".join(command)
    assert "-i /state/id_ed25519" in text and "IdentitiesOnly=yes" in text
    assert "UserKnownHostsFile=/state/known_hosts" in text
    assert "StrictHostKeyChecking=accept-new" in text


def test_missing_tools_and_root_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(machine.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(machine.shutil, "which", lambda tool: None if tool != "ip" else "/ip")
    problems = " ".join(machine.missing_requirements())
    assert "need root" in problems
    assert "podman is missing: apt-get install podman runc" in problems
    assert "debootstrap is missing" in problems
    assert "debootstrap" not in " ".join(machine.missing_requirements(build=False))
    with pytest.raises(machine.TestHostError, match="podman is missing"):
        hosts.down("web")


def test_cli_errors_exit_2_and_list_is_empty_in_a_new_state_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUPROV_TESTHOST_DIR", str(tmp_path))
    runner = CliRunner()
    done = runner.invoke(app, ["up", "Bad_Name"])
    assert done.exit_code == 2 and "bad test host name" in done.output
    done = runner.invoke(app, ["up", "web", "--volume", "nodst"])
    assert done.exit_code == 2 and "bad volume" in done.output
    done = runner.invoke(app, ["list", "--json"])
    assert done.exit_code == 0 and json.loads(done.output) == []


def test_a_real_host_boots_and_pyinfra_reaches_it(testhost: hosts.TestHost) -> None:
    """systemd is PID 1 and booted; SSH and pyinfra's ssh connector both get in."""
    assert hosts.system_state(testhost) in ("running", "degraded")
    done = subprocess.run(
        hosts.ssh_command(testhost, f"test -d {hosts.CCACHE_MOUNT} && ps -p 1 -o comm="),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.stdout.strip() == "systemd", done.stderr
    name, data = hosts.pyinfra_host(testhost)
    inventory = Inventory(([(name, data)], {}))
    pyinfra_state = State(inventory, Config())
    connect_all(pyinfra_state)
    try:
        pyinfra_host = inventory.get_host(name)
        assert pyinfra_host.connected
        assert pyinfra_host.get_fact(Os) == "Linux"
        ok, output = pyinfra_host.run_shell_command("systemctl is-active ssh")
        assert ok and output.stdout_lines == ["active"]
    finally:
        disconnect_all(pyinfra_state)


def test_down_removes_the_container_and_the_namespace(testhost_factory: MakeHost) -> None:
    made = testhost_factory("e2e-down")
    env = podman.podman_env(state.Paths(state.state_dir()))
    exists = ["podman", "container", "exists", made.container]
    assert subprocess.run(exists, env=env, check=False).returncode == 0
    assert Path("/run/netns", made.netns).exists()
    assert hosts.down("e2e-down") is True
    assert subprocess.run(exists, env=env, check=False).returncode == 1
    assert not Path("/run/netns", made.netns).exists()
    assert not Path("/sys/class/net", network.veth_name(made.index)).exists()
    assert "e2e-down" not in [h.name for h in hosts.list_hosts()]
    assert hosts.down("e2e-down") is False
