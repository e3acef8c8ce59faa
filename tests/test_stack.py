"""Inventory data to a validated Stack: defaults, merging, and the field every bad value names.

Also the inventory loader and `gpuprov plan` on inventory files written here: a bad one exits 2
naming file, host and field before any host is contacted.
"""

from __future__ import annotations

import errno
import json
import socket
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from paramiko.ssh_exception import NoValidConnectionsError, SSHException
from pyinfra.api.exceptions import ConnectError
from pyinfra.connectors.ssh_util import raise_connect_error

from checks.reporting import schema
from provision import deploy, hostplan, role_table, stack
from provision.stack import Canary, StackError

ROOT = Path(__file__).resolve().parent.parent
GPUPROV = ROOT / ".venv" / "bin" / "gpuprov"
MAIN = {"name": "main", "model": "/srv/models/m.gguf", "port": 8080}
BIG = {"name": "big", "model": "/srv/models/b.gguf", "port": 8081}


def profiles(*items: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"llama_server_profiles": list(items), **more}


def test_defaults_are_the_roles_defaults_merged() -> None:
    merged: dict[str, Any] = {}
    for role in role_table.NAMES:
        merged.update(yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text()))
    assert dict(stack.defaults()) == merged


def test_variables_overlay_only_role_names() -> None:
    v = stack.variables({"canary_interval": 60, "ssh_user": "me", "llama_server_profile": []})
    assert v["canary_interval"] == 60
    assert v["canary_timeout"] == 20
    assert "ssh_user" not in v
    assert "llama_server_profile" not in v


def test_empty_data_takes_every_default() -> None:
    s = stack.from_data({})
    assert s.source == stack.Source("https://github.com/ggml-org/llama.cpp.git", "b7895")
    assert s.source.kind == "git"
    assert s.prefix == "/opt/gpuprov/llama.cpp"
    assert (s.cuda_architectures, s.cuda_compiler, s.cmake_args) == ("", "", ())
    assert (s.build_jobs, s.install_toolchain, s.server_user) == (0, True, "gpuprov-llama")
    assert s.profiles == ()
    assert s.canary == Canary(enabled=True, interval=30, timeout=20, failures=2)


def test_profile_takes_the_profile_defaults() -> None:
    (p,) = stack.from_data(profiles(MAIN)).profiles
    assert p == stack.Profile(name="main", model="/srv/models/m.gguf", alias="main", port=8080)
    assert p.unit == "gpuprov-llama-main.service"


def test_profile_defaults_from_data_merge_under_each_profile() -> None:
    data = profiles(
        MAIN,
        {**BIG, "ctx_size": 65536, "alias": "Big One", "extra_args": ["--jinja"]},
        llama_server_defaults={
            **stack.defaults()["llama_server_defaults"],
            "ctx_size": 16384,
            "flash_attn": "on",
            "mlock": True,
        },
        llama_cpp_cuda_architectures="86;120a",
        canary_interval=60,
    )
    s = stack.from_data(data)
    main, big = s.profiles
    assert (main.ctx_size, main.flash_attn, main.mlock, main.alias) == (16384, "on", True, "main")
    assert (big.ctx_size, big.flash_attn, big.alias) == (65536, "on", "Big One")
    assert big.extra_args == ("--jinja",)
    assert s.cuda_architectures == "86;120a"
    assert s.canary.interval == 60


def test_tarball_source(tmp_path: Path) -> None:
    tarball = tmp_path / "llama.cpp-b7895.tar.gz"
    tarball.write_bytes(b"not checked here")
    s = stack.from_data({"llama_cpp_tarball": str(tarball), "llama_cpp_tarball_subdir": "src"})
    assert s.source.kind == "tarball"
    assert (s.source.tarball, s.source.tarball_subdir) == (str(tarball), "src")


BAD: list[tuple[str, dict[str, Any], str]] = [
    ("port 0", profiles({**MAIN, "port": 0}), "llama_server_profiles[0].port"),
    ("port str", profiles({**MAIN, "port": "8080"}), "llama_server_profiles[0].port"),
    ("port bool", profiles({**MAIN, "port": True}), "llama_server_profiles[0].port"),
    ("port 2nd", profiles(MAIN, {**BIG, "port": 70000}), "llama_server_profiles[1].port"),
    ("dup name", profiles(MAIN, {**BIG, "name": "main"}), "llama_server_profiles[1].name"),
    ("dup port", profiles(MAIN, {**BIG, "port": 8080}), "llama_server_profiles[1].port"),
    ("name case", profiles({**MAIN, "name": "Main"}), "llama_server_profiles[0].name"),
    ("no name", profiles({"model": "/m.gguf", "port": 1}), "llama_server_profiles[0].name"),
    ("flash yes", profiles({**MAIN, "flash_attn": "yes"}), "llama_server_profiles[0].flash_attn"),
    ("flash off", profiles({**MAIN, "flash_attn": False}), "llama_server_profiles[0].flash_attn"),
    ("unknown", profiles({**MAIN, "ctx": 4096}), "llama_server_profiles[0].ctx"),
    (
        "unknown default",
        profiles(MAIN, llama_server_defaults={"contxt_size": 1}),
        "llama_server_profiles[0].contxt_size",
    ),
    ("relative model", profiles({**MAIN, "model": "m.gguf"}), "llama_server_profiles[0].model"),
    ("dotdot model", profiles({**MAIN, "model": "/m/../x"}), "llama_server_profiles[0].model"),
    ("alias newline", profiles({**MAIN, "alias": "a\nb"}), "llama_server_profiles[0].alias"),
    ("alias tab", profiles({**MAIN, "alias": "a\tb"}), "llama_server_profiles[0].alias"),
    ("alias empty", profiles({**MAIN, "alias": ""}), "llama_server_profiles[0].alias"),
    ("cache v", profiles({**MAIN, "cache_type_v": "q8"}), "llama_server_profiles[0].cache_type_v"),
    ("gpu layers", profiles({**MAIN, "gpu_layers": "many"}), "llama_server_profiles[0].gpu_layers"),
    (
        "api env",
        profiles({**MAIN, "api_key_env": "MY-KEY"}),
        "llama_server_profiles[0].api_key_env",
    ),
    (
        "args str",
        profiles({**MAIN, "extra_args": "--jinja"}),
        "llama_server_profiles[0].extra_args",
    ),
    ("args int", profiles({**MAIN, "extra_args": [1]}), "llama_server_profiles[0].extra_args"),
    ("args nl", profiles({**MAIN, "extra_args": ["a\nb"]}), "llama_server_profiles[0].extra_args"),
    ("ctx float", profiles({**MAIN, "ctx_size": 4096.0}), "llama_server_profiles[0].ctx_size"),
    ("mlock str", profiles({**MAIN, "mlock": "yes"}), "llama_server_profiles[0].mlock"),
    ("profile str", profiles("main"), "llama_server_profiles[0]"),  # type: ignore[arg-type]
    ("profiles map", {"llama_server_profiles": MAIN}, "llama_server_profiles"),
    ("defaults str", profiles(MAIN, llama_server_defaults="ctx_size=1"), "llama_server_defaults"),
    ("arch sm_86", {"llama_cpp_cuda_architectures": "sm_86"}, "llama_cpp_cuda_architectures"),
    ("arch native", {"llama_cpp_cuda_architectures": "native"}, "llama_cpp_cuda_architectures"),
    ("arch empty item", {"llama_cpp_cuda_architectures": "86;"}, "llama_cpp_cuda_architectures"),
    ("arch comma", {"llama_cpp_cuda_architectures": "86,120a"}, "llama_cpp_cuda_architectures"),
    ("tarball", {"llama_cpp_tarball": "/nonexistent/llama.tar.gz"}, "llama_cpp_tarball"),
    ("ref", {"llama_cpp_ref": "b1; rm -rf /"}, "llama_cpp_ref"),
    ("git url", {"llama_cpp_git_url": ""}, "llama_cpp_git_url"),
    ("prefix", {"llama_cpp_prefix": "opt/llama"}, "llama_cpp_prefix"),
    ("compiler", {"llama_cpp_cuda_compiler": "nvcc"}, "llama_cpp_cuda_compiler"),
    ("cmake args", {"llama_cpp_cmake_args": "-DX=1"}, "llama_cpp_cmake_args"),
    ("jobs bool", {"llama_cpp_build_jobs": True}, "llama_cpp_build_jobs"),
    ("jobs big", {"llama_cpp_build_jobs": 1025}, "llama_cpp_build_jobs"),
    ("toolchain", {"build_toolchain_install": "yes"}, "build_toolchain_install"),
    ("interval low", {"canary_interval": 4}, "canary_interval"),
    ("interval high", {"canary_interval": 86401}, "canary_interval"),
    ("interval str", {"canary_interval": "30"}, "canary_interval"),
    ("timeout", {"canary_timeout": 0}, "canary_timeout"),
    ("failures", {"canary_failures": 101}, "canary_failures"),
    ("cool-down", {"canary_cool_down": -1}, "canary_cool_down"),
    ("canary on", {"canary_enabled": 1}, "canary_enabled"),
    ("user", {"llama_server_user": "Llama"}, "llama_server_user"),
]


@pytest.mark.parametrize(("data", "field"), [pytest.param(d, f, id=i) for i, d, f in BAD])
def test_bad_value_names_its_field(data: dict[str, Any], field: str) -> None:
    with pytest.raises(StackError) as caught:
        stack.from_data(data)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")


@pytest.mark.parametrize(
    "key",
    [
        "llama_server_config_dir",
        "canary_script",
        "canary_config",
        "canary_state_dir",
        "llama_cpp_ccache_dir",
    ],
)
def test_path_settings_must_be_absolute(key: str) -> None:
    with pytest.raises(StackError) as caught:
        stack.from_data(profiles(MAIN, **{key: "relative/path"}))
    assert caught.value.field == key


@pytest.mark.parametrize(
    ("key", "value"),
    [("llama_cpp_git_url", "--upload-pack=touch /tmp/x"), ("llama_cpp_ref", "--all")],
)
def test_git_source_cannot_be_an_option(key: str, value: str) -> None:
    with pytest.raises(StackError) as caught:
        stack.from_data({key: value})
    assert caught.value.field == key


def test_secrets_come_from_the_environment() -> None:
    s = stack.from_data(profiles(MAIN, {**BIG, "api_key_env": "GPUPROV_BIG_KEY"}))
    assert hostplan.secrets(s, {"GPUPROV_BIG_KEY": 's3cr"et', "OTHER": "x"}) == {"big": 's3cr"et'}
    for env in ({}, {"GPUPROV_BIG_KEY": ""}):
        with pytest.raises(StackError) as caught:
            hostplan.secrets(s, env)
        assert caught.value.field == "llama_server_profiles[1].api_key_env"
        assert "GPUPROV_BIG_KEY" in caught.value.reason


def test_secret_with_a_control_character_is_refused_without_showing_it() -> None:
    s = stack.from_data(profiles({**MAIN, "api_key_env": "GPUPROV_KEY"}))
    with pytest.raises(StackError) as caught:
        hostplan.secrets(s, {"GPUPROV_KEY": "sk-abc123\r"})
    assert caught.value.field == "llama_server_profiles[0].api_key_env"
    assert caught.value.reason == "environment variable GPUPROV_KEY holds a control character"


def test_secrets_default_to_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    s = stack.from_data(profiles({**MAIN, "api_key_env": "GPUPROV_TEST_KEY"}))
    monkeypatch.setenv("GPUPROV_TEST_KEY", "from-env")
    assert hostplan.secrets(s) == {"main": "from-env"}
    monkeypatch.delenv("GPUPROV_TEST_KEY")
    with pytest.raises(StackError):
        hostplan.secrets(s)


GOOD_INVENTORY = """\
boxes = [
    ("box1", {"llama_server_profiles": [{"name": "main", "model": "/m/a.gguf", "port": 8080}]}),
    ("box2", {"llama_server_profiles": [], "canary_interval": 60}),
]
"""


def inventory(tmp_path: Path, text: str, name: str = "inv.py") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_good_inventory(tmp_path: Path) -> None:
    path = inventory(tmp_path, GOOD_INVENTORY)
    _, _, hosts = deploy.load_inventory(path)
    assert [h.name for h in hosts] == ["box1", "box2"]
    stacks = deploy.validate(path, hosts)
    assert [p.name for p in stacks["box1"][0].profiles] == ["main"]
    assert stacks["box2"][0].canary.interval == 60
    assert stacks["box2"][1]["canary_interval"] == 60
    assert [h.name for h in deploy.load_inventory(path, ["box2"])[2]] == ["box2"]
    assert [h.name for h in deploy.load_inventory(path, ["boxes"])[2]] == ["box1", "box2"]
    assert [h.name for h in deploy.load_inventory(path, ["box*"])[2]] == ["box1", "box2"]


def _error(path: str, limit: list[str] | None = None) -> str:
    with pytest.raises(deploy.InventoryError) as caught:
        _, _, hosts = deploy.load_inventory(path, limit)
        deploy.validate(path, hosts)
    return str(caught.value)


def test_inventory_syntax_error(tmp_path: Path) -> None:
    path = inventory(tmp_path, 'boxes = [("box1", {"llama_server_profiles": [}]\n')
    message = _error(path)
    assert message.startswith(f"{path}: cannot load: SyntaxError")


def test_inventory_typo_top_level_key(tmp_path: Path) -> None:
    path = inventory(
        tmp_path,
        GOOD_INVENTORY.replace(
            '("box2", {"llama_server_profiles"', '("box2", {"llama_server_profile"'
        ),
    )
    assert _error(path) == f"{path}: host 'box2': llama_server_profile: unknown setting"


def test_inventory_bad_value(tmp_path: Path) -> None:
    path = inventory(tmp_path, GOOD_INVENTORY.replace('"port": 8080', '"port": 0'))
    message = _error(path)
    assert message.startswith(f"{path}: host 'box1': llama_server_profiles[0].port: ")


def test_inventory_missing_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUPROV_NO_SUCH_KEY", raising=False)
    text = GOOD_INVENTORY.replace(
        '"port": 8080', '"port": 8080, "api_key_env": "GPUPROV_NO_SUCH_KEY"'
    )
    path = inventory(tmp_path, text)
    message = _error(path)
    assert message.startswith(f"{path}: host 'box1': llama_server_profiles[0].api_key_env: ")
    assert "GPUPROV_NO_SUCH_KEY" in message


def test_inventory_raising_names_the_error(tmp_path: Path) -> None:
    path = inventory(tmp_path, "boxes = [1 / 0]\n")
    assert _error(path) == f"{path}: cannot load: ZeroDivisionError: division by zero"


def refused_tuple(name: str) -> str:
    return (
        "a module-level tuple is read as a host group ([hosts], {group data}) and this is not "
        f"one; write hosts as a list, or name the variable _{name} to keep it out of the inventory"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('x = ("box1", "box2")\n', "x = ('box1', 'box2'): " + refused_tuple("x")),
        (
            'boxes = ["box1"]\nPORTS = (8080, 8081)\n',
            "PORTS = (8080, 8081): " + refused_tuple("PORTS"),
        ),
        ('boxes = ["box1"]\nNONE = ()\n', "NONE = (): " + refused_tuple("NONE")),
        (
            'boxes = (("box1", "box2"), {})\n',
            "boxes = (('box1', 'box2'), {}): " + refused_tuple("boxes"),
        ),
        (
            'boxes = ["box1", ("box2", "gpu")]\n',
            "boxes[1] = ('box2', 'gpu'): a host is a name or a (name, {host data}) pair",
        ),
        (
            'boxes = (["box1", ("box2",)], {"canary_interval": 60})\n',
            "boxes[1] = ('box2',): a host is a name or a (name, {host data}) pair",
        ),
    ],
    ids=["two-names", "helper", "empty", "hosts-tuple", "host-without-dict", "group-host"],
)
def test_inventory_value_that_is_no_host_group_is_refused(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = inventory(tmp_path, text)
    assert _error(path) == f"{path}: {expected}"


def test_inventory_groups_and_helpers_that_are_no_hosts(tmp_path: Path) -> None:
    """A ([hosts], {data}) group is a group; private names and non-sequences are not hosts."""
    text = (
        'gpus = (["box1", ("box2", {"canary_interval": 60})], {"canary_timeout": 5})\n'
        "_PORTS = (8080, 8081)\nBASE = {'canary_interval': 30}\nNAME = 'box'\n"
    )
    path = inventory(tmp_path, text)
    _, _, hosts = deploy.load_inventory(path)
    assert [h.name for h in hosts] == ["box1", "box2"]
    assert [h.data.canary_timeout for h in hosts] == [5, 5]
    assert hosts[1].data.canary_interval == 60


def test_inventory_missing_file(tmp_path: Path) -> None:
    path = str(tmp_path / "nope.py")
    assert _error(path) == f"{path}: no such inventory file"


def test_inventory_without_hosts(tmp_path: Path) -> None:
    path = inventory(tmp_path, "boxes = []\n")
    assert _error(path) == f"{path}: no hosts"


def test_limit_matching_nothing(tmp_path: Path) -> None:
    path = inventory(tmp_path, GOOD_INVENTORY)
    assert _error(path, ["web*", "db"]) == f"{path}: --limit web*,db matches no host"


@pytest.mark.skipif(not GPUPROV.is_file(), reason="gpuprov not installed in .venv")
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            # A host no connection could reach: validation must fail first.
            'h = [("192.0.2.1", {"llama_server_profiles": '
            '[{"name": "main", "model": "models/m.gguf", "port": 8080}]})]\n',
            "host '192.0.2.1': llama_server_profiles[0].model: must be an absolute path",
        ),
        (
            'h = [("192.0.2.1", {"canary_intervall": 60})]\n',
            "host '192.0.2.1': canary_intervall: unknown setting",
        ),
        (
            'h = ["192.0.2.1"]\nPORTS = (8080, 8081)\n',
            "PORTS = (8080, 8081): a module-level tuple is read as a host group",
        ),
    ],
    ids=["relative-model", "typo", "helper-tuple"],
)
def test_cli_plan_bad_inventory_exits_2(tmp_path: Path, text: str, expected: str) -> None:
    path = inventory(tmp_path, text)
    done = subprocess.run(
        [str(GPUPROV), "plan", path], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"gpuprov: {path}: {expected}" in done.stderr
    assert done.stdout == ""
    assert "connect" not in done.stderr.lower()


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.mark.skipif(not GPUPROV.is_file(), reason="gpuprov not installed in .venv")
@pytest.mark.parametrize(
    "argv",
    [["plan", "--json"], ["apply", "-y", "--json"], ["plan"], ["apply", "-y"]],
    ids=" ".join,
)
def test_cli_unreachable_hosts_are_skipped_with_the_reason(tmp_path: Path, argv: list[str]) -> None:
    """Every host unreachable (192.0.2.1 is TEST-NET, never routed; a closed port): one line
    each naming the reason, exit 1, the report still printed."""
    port = closed_port()
    path = inventory(
        tmp_path,
        f'h = [("192.0.2.1", {{}}), ("127.0.0.1", {{"ssh_port": {port}}})]\n',
    )
    command, *options = argv
    done = subprocess.run(
        [str(GPUPROV), command, path, *options],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if "connect" in line]
    assert len(lines) == 2, done.stderr
    assert lines[0].startswith("gpuprov: cannot connect to 192.0.2.1: ")
    test_net = lines[0].removeprefix("gpuprov: cannot connect to 192.0.2.1: ")
    assert test_net.strip()  # timed out, No route to host, ...: the system's words
    assert lines[1] == "gpuprov: cannot connect to 127.0.0.1: Connection refused"
    reasons = {"192.0.2.1": test_net, "127.0.0.1": "Connection refused"}
    skipped = {host: f"could not connect: {reason}" for host, reason in reasons.items()}
    if "--json" in options:
        data = json.loads(done.stdout)
        jsonschema.validate(data, schema.committed("converge"))
        assert {name: host["skipped"] for name, host in data["hosts"].items()} == skipped
    else:
        assert done.stdout.splitlines() == [f"{h}: not changed: {r}" for h, r in skipped.items()]


@pytest.mark.skipif(not GPUPROV.is_file(), reason="gpuprov not installed in .venv")
def test_cli_plan_goes_on_with_the_hosts_it_reaches(tmp_path: Path) -> None:
    path = inventory(
        tmp_path,
        f'h = ["@local", ("127.0.0.1", {{"ssh_port": {closed_port()}, '
        '"ssh_connect_timeout": 2}), ("192.0.2.1", {"ssh_connect_timeout": 2})]\n',
    )
    done = subprocess.run(
        [str(GPUPROV), "plan", path, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)
    jsonschema.validate(data, schema.committed("converge"))
    local = data["hosts"]["@local"]
    assert not (local["skipped"] or "").startswith("could not connect")
    assert local["operations"] or local["skipped"]  # planned (or refused for a reason of its own)
    assert data["hosts"]["127.0.0.1"]["skipped"] == "could not connect: Connection refused"
    assert data["hosts"]["192.0.2.1"]["skipped"].startswith("could not connect: ")
    assert done.stderr.count("gpuprov: cannot connect to ") == 2


def connect_error(cause: Exception) -> ConnectError:
    """The ConnectError pyinfra's SSH connector raises when connecting failed with `cause`."""
    try:
        try:
            raise cause
        except socket.gaierror as e:
            raise_connect_error(None, "Could not resolve hostname", e)
        except OSError as e:
            raise_connect_error(None, "Could not connect", e)
        except SSHException as e:
            raise_connect_error(None, "SSH error", e)
    except ConnectError as exc:
        return exc
    raise AssertionError("no ConnectError")


@pytest.mark.parametrize(
    ("cause", "reason"),
    [
        (TimeoutError("timed out"), "timed out"),
        (OSError(errno.ENETUNREACH, "Network is unreachable"), "Network is unreachable"),
        (
            NoValidConnectionsError(
                {("192.0.2.1", 22): OSError(errno.EHOSTUNREACH, "No route to host")}
            ),
            "No route to host",
        ),
        (
            NoValidConnectionsError(
                {
                    ("127.0.0.1", 22): ConnectionRefusedError(
                        errno.ECONNREFUSED, "Connection refused"
                    ),
                    ("::1", 22, 0, 0): ConnectionRefusedError(
                        errno.ECONNREFUSED, "Connection refused"
                    ),
                }
            ),
            "Connection refused",
        ),
        (
            socket.gaierror(-2, "Name or service not known"),
            "Could not resolve hostname ([Errno -2] Name or service not known)",
        ),
        (
            SSHException("Error reading SSH protocol banner"),
            "SSH error (Error reading SSH protocol banner)",
        ),
    ],
    ids=["timeout", "net-unreachable", "no-route", "refused", "dns", "ssh"],
)
def test_connect_reason(cause: Exception, reason: str) -> None:
    assert deploy.connect_reason(connect_error(cause)) == reason
