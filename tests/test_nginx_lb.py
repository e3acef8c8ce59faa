"""The balancer's config, its backends, Ansible's copy of both, and the install script.

Real: the role's template rendered by `provision.nginx.render`, ansible-playbook running the
role's own tasks/backends.yml and template with its filter plugin, and the install script under
/bin/sh. Stand-ins: `nginx` and `systemctl` on PATH, shell scripts that record their calls (and
what conf.d held when `nginx -t` ran) and fail on demand. Real nginx and systemd check the same
files in tests/e2e/test_nginx_lb_config.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from provision import nginx, stack
from provision.stack import StackError

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "roles" / "nginx_lb" / "files" / "gpuprov-lb-install.sh"
PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
HOSTILE = "127.0.0.1; include /etc/passwd"


def vllm_defaults(**changes: Any) -> dict[str, Any]:
    """The vllm role's vllm_defaults with `changes` (a host setting it replaces the whole map)."""
    return {**stack.defaults()["vllm_defaults"], **changes}


def replica(name: str, port: int, gpu: int, **more: Any) -> dict[str, Any]:
    return {"name": name, "model": "Qwen/Qwen3-0.6B", "port": port, "gpus": [gpu], **more}


def host_data(*replicas: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"nginx_lb_enabled": True, "vllm_replicas": list(replicas), **more}


def variables(data: dict[str, Any]) -> dict[str, Any]:
    """The role's variables for valid host data (what a HostPlan carries)."""
    stack.from_data(data)
    return stack.variables(data)


def upstream_servers(text: str) -> list[str]:
    return [line.split()[1] for line in text.splitlines() if line.startswith("    server ")]


def field_of(data: dict[str, Any]) -> str:
    """The variable a render refuses, read from the error."""
    with pytest.raises(StackError) as caught:
        nginx.render(stack.variables(data))
    assert str(caught.value).startswith(f"{caught.value.field}: ")
    return caught.value.field


TWO_REPLICAS = """\
# Managed by gpuprov; local changes are overwritten on the next apply.
# One endpoint for the host's vLLM replicas: each request goes to the backend with the fewest
# active connections, so one long completion does not hold others up behind it.
upstream gpuprov_lb {
    least_conn;
    server 127.0.0.1:8500 max_fails=3 fail_timeout=10s;
    server 127.0.0.1:8501 max_fails=3 fail_timeout=10s;
    keepalive 16;
}

server {
    listen 127.0.0.1:8400;

    # Answered by nginx itself: the balancer is up, whatever the backends do.
    location = /gpuprov-lb-health {
        access_log off;
        default_type text/plain;
        return 200 "ok\\n";
    }

    location / {
        proxy_pass http://gpuprov_lb;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_set_header Host $host;
        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        # Streamed completions (SSE) pass through as they come, and so do request bodies.
        proxy_buffering off;
        proxy_request_buffering off;
        proxy_read_timeout 900s;
        proxy_send_timeout 900s;
        client_max_body_size 64m;
    }
}
"""


def test_two_replicas_exact() -> None:
    data = host_data(replica("r1", 8500, 0), replica("r2", 8501, 1))
    assert nginx.render(variables(data)) == TWO_REPLICAS


def test_one_replica_with_every_setting() -> None:
    data = host_data(
        replica("only", 8500, 0, host="0.0.0.0"),
        nginx_lb_listen=9000,
        nginx_lb_bind="::",
        nginx_lb_max_fails=0,
        nginx_lb_fail_timeout=30,
        nginx_lb_read_timeout=3600,
        nginx_lb_client_max_body_size="1g",
        nginx_lb_keepalive=64,
    )
    text = nginx.render(variables(data))
    lines = text.splitlines()
    assert upstream_servers(text) == ["127.0.0.1:8500"]
    assert "    server 127.0.0.1:8500 max_fails=0 fail_timeout=30s;" in lines
    assert "    keepalive 64;" in lines
    assert "    listen [::]:9000;" in lines
    for line in ("proxy_read_timeout 3600s;", "proxy_send_timeout 3600s;"):
        assert f"        {line}" in lines
    assert "        client_max_body_size 1g;" in lines


def test_three_listed_servers_win_over_replicas() -> None:
    data = host_data(
        replica("r1", 8500, 0),
        nginx_lb_servers=["10.0.0.5:8000", "[fd00::0:7]:8000", "gpu-box.lan:8001"],
    )
    text = nginx.render(variables(data))
    assert upstream_servers(text) == ["10.0.0.5:8000", "[fd00::7]:8000", "gpu-box.lan:8001"]
    assert text.count("least_conn;") == 1


@pytest.mark.parametrize(
    ("bind", "listen"),
    [
        ("127.0.0.1", "127.0.0.1:8400"),
        ("0.0.0.0", "0.0.0.0:8400"),
        ("::1", "[::1]:8400"),
        ("::", "[::]:8400"),
        ("localhost", "localhost:8400"),
    ],
)
def test_listen(bind: str, listen: str) -> None:
    text = nginx.render(variables(host_data(replica("r", 8500, 0), nginx_lb_bind=bind)))
    assert f"    listen {listen};" in text.splitlines()


@pytest.mark.parametrize(
    "bind",
    [
        HOSTILE,
        "127.0.0.1 ssl",
        "$host",
        "[::1]",
        "fe80::1%eth0",
        "fe80::1%x;include",
        "256.1.1.1",
        "1.2.3",
        "-host",
        "",
        8400,
        None,
    ],
)
def test_bad_bind_is_refused_naming_the_variable(bind: object) -> None:
    assert field_of(host_data(replica("r", 8500, 0), nginx_lb_bind=bind)) == "nginx_lb_bind"


def test_hostile_bind_error_says_what_it_got() -> None:
    with pytest.raises(StackError, match=r"^nginx_lb_bind: an IP address or a host name, got"):
        nginx.render(stack.variables(host_data(replica("r", 8500, 0), nginx_lb_bind=HOSTILE)))


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("nginx_lb_listen", 0),
        ("nginx_lb_listen", 65536),
        ("nginx_lb_listen", "8400; include /etc/passwd"),
        ("nginx_lb_listen", True),
        ("nginx_lb_listen", 8400.0),
        ("nginx_lb_max_fails", -1),
        ("nginx_lb_fail_timeout", 0),
        ("nginx_lb_read_timeout", "900s"),
        ("nginx_lb_keepalive", 0),
        ("nginx_lb_client_max_body_size", "64m; include /etc/passwd"),
        ("nginx_lb_client_max_body_size", "1t"),
        ("nginx_lb_client_max_body_size", ""),
    ],
)
def test_bad_number_or_size_is_refused_naming_the_variable(name: str, value: object) -> None:
    assert field_of(host_data(replica("r", 8500, 0), **{name: value})) == name


def test_digit_strings_pass_as_numbers() -> None:
    """Ansible's -e gives strings: "8401" is 8401 to both engines."""
    text = nginx.render(stack.variables(host_data(replica("r", 8500, 0), nginx_lb_listen="8401")))
    assert "    listen 127.0.0.1:8401;" in text.splitlines()


@pytest.mark.parametrize(
    "entry",
    [
        HOSTILE,
        "127.0.0.1",
        "127.0.0.1:0",
        "127.0.0.1:8500 backup",
        "127.0.0.1:85x0",
        "::1:8500",
        "[::1]8500",
        "[127.0.0.1]:8500",
        "unix:/run/vllm.sock",
        "host_name:8500",
        "",
    ],
)
def test_bad_server_is_refused_naming_the_entry(entry: str) -> None:
    data = host_data(nginx_lb_servers=["127.0.0.1:8500", entry])
    assert field_of(data) == "nginx_lb_servers[1]"


@pytest.mark.parametrize(
    "value", ["/etc/nginx/conf.d/gpuprov-lb.conf", "/etc/nginx/sites-enabled/lb"]
)
def test_conf_path(value: str) -> None:
    assert nginx.path(value, "nginx_lb_conf") == value


@pytest.mark.parametrize(
    "value",
    [
        "conf.d/gpuprov-lb.conf",
        "/etc/nginx/conf.d/",
        "/etc/nginx/conf.d/a b.conf",
        "/etc/nginx/conf.d/a;b.conf",
        "/etc/nginx/../passwd",
        "/etc/nginx/conf.d/$x.conf",
        "/",
        "",
        None,
    ],
)
def test_bad_conf_path_is_refused_naming_the_variable(value: object) -> None:
    with pytest.raises(StackError, match=r"^nginx_lb_conf: an absolute file path"):
        nginx.path(value, "nginx_lb_conf")


def test_replica_reaching_the_template_unchecked_is_refused() -> None:
    """Ansible has no gpuprov validation in front: the template still refuses the host."""
    data = host_data({"name": "r", "port": 8500, "host": HOSTILE})
    assert field_of(data) == "vllm_replicas[0]"


def test_no_backend_is_refused() -> None:
    data = host_data()
    assert nginx.backends(stack.variables(data)) == []
    assert field_of(data) == "nginx_lb_servers"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            host_data(replica("a", 8500, 0), replica("b", 8501, 1)),
            ["127.0.0.1:8500", "127.0.0.1:8501"],
        ),
        (host_data(replica("a", 8500, 0, host="0.0.0.0")), ["127.0.0.1:8500"]),
        (host_data(replica("a", 8500, 0, host="::")), ["127.0.0.1:8500"]),
        (host_data(replica("a", 8500, 0, host="::1")), ["[::1]:8500"]),
        (host_data(replica("a", 8500, 0, host="10.1.2.3")), ["10.1.2.3:8500"]),
        (
            host_data(replica("a", 8500, 0), vllm_defaults=vllm_defaults(host="10.9.9.9")),
            ["10.9.9.9:8500"],
        ),
        (
            host_data(replica("a", 8500, 0), nginx_lb_servers=["10.0.0.5:8000"]),
            ["10.0.0.5:8000"],
        ),
        (host_data(), []),
    ],
)
def test_backends(data: dict[str, Any], expected: list[str]) -> None:
    assert nginx.backends(stack.variables(data)) == expected


def test_backends_default_host_comes_from_vllm_defaults() -> None:
    """The role's vllm_defaults.host is 127.0.0.1; a host overriding it changes every replica."""
    v = stack.variables(host_data(replica("a", 8500, 0)))
    assert v["vllm_defaults"]["host"] == "127.0.0.1"
    v["vllm_defaults"] = {**v["vllm_defaults"], "host": "::"}
    assert nginx.backends(v) == ["127.0.0.1:8500"]


# --- Ansible -----------------------------------------------------------------------------------

ANSIBLE_CASES = {
    "two-replicas": host_data(replica("r1", 8500, 0), replica("r2", 8501, 1)),
    "wildcard-and-v6": host_data(
        replica("r1", 8500, 0, host="0.0.0.0"),
        replica("r2", 8501, 1, host="::1"),
        replica("r3", 8502, 2, host="::"),
        nginx_lb_bind="::1",
        nginx_lb_listen=9400,
    ),
    "defaults-host": host_data(
        replica("r1", 8500, 0), vllm_defaults=vllm_defaults(host="10.9.9.9")
    ),
    "listed-servers": host_data(
        replica("r1", 8500, 0),
        nginx_lb_servers=["10.0.0.5:8000", "[fd00::0:7]:8000", "gpu-box.lan:8001"],
        nginx_lb_client_max_body_size="128m",
        nginx_lb_keepalive=4,
    ),
}
ANSIBLE_REFUSED = {
    "hostile-bind": (host_data(replica("r1", 8500, 0), nginx_lb_bind=HOSTILE), "nginx_lb_bind"),
    "hostile-replica": (
        host_data({"name": "r", "port": 8500, "host": HOSTILE}),
        "vllm_replicas[0]",
    ),
}
PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - ansible.builtin.include_role: {name: nginx_lb, tasks_from: backends, public: true}
    - ansible.builtin.template:
        src: "{{ template }}"
        dest: "{{ out_dir }}/{{ inventory_hostname }}.conf"
      vars:
        gpuprov_lb_backends: "{{ nginx_lb_backends }}"  # as the role's template task passes it
      delegate_to: localhost
"""


@pytest.mark.skipif(not PLAYBOOK.is_file(), reason="no ansible-playbook")
def test_ansible_renders_the_same_bytes(tmp_path: Path) -> None:
    """The role's backends.yml and template under ansible-playbook, one host per case."""
    cases = {name: (data, "") for name, data in ANSIBLE_CASES.items()} | ANSIBLE_REFUSED
    lines = ["[all]"]
    host_vars = tmp_path / "host_vars"
    host_vars.mkdir()
    for name, (data, _) in cases.items():
        lines.append(f"{name} ansible_connection=local ansible_python_interpreter={sys.executable}")
        (host_vars / f"{name}.json").write_text(json.dumps(data))
    (tmp_path / "hosts.ini").write_text("\n".join(lines) + "\n")
    (tmp_path / "play.yml").write_text(PLAY)
    out = tmp_path / "out"
    out.mkdir()
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible" / "ansible.cfg"),
        "PYTHONPATH": str(ROOT),
        "ANSIBLE_HOME": str(tmp_path / "ansible-home"),
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
        "ANSIBLE_NOCOLOR": "1",
    }
    template = ROOT / "roles" / "nginx_lb" / "templates" / "gpuprov-lb.conf.j2"
    done = subprocess.run(
        [
            str(PLAYBOOK),
            "-i",
            str(tmp_path / "hosts.ini"),
            "-e",
            f"out_dir={out}",
            "-e",
            f"template={template}",
            str(tmp_path / "play.yml"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT / "ansible",
        timeout=300,
        check=False,
    )
    assert done.returncode == 2, done.stdout[-4000:] + done.stderr[-2000:]  # the refused hosts
    for name, data in ANSIBLE_CASES.items():
        expected = nginx.render(variables(data))
        assert (out / f"{name}.conf").read_text() == expected, name
    for name, (_, field) in ANSIBLE_REFUSED.items():
        assert not (out / f"{name}.conf").exists()
        failed = [
            line for line in done.stdout.splitlines() if f"[{name}" in line and "FAILED" in line
        ]
        assert failed, done.stdout[-4000:]
        assert f"{field}: " in failed[0], failed[0]


# --- the install script ------------------------------------------------------------------------

NGINX = """\
#!/bin/sh
here=$(dirname "$0")
echo "nginx $*" >> "$here/calls"
cat "{dst}" > "$here/seen" 2>/dev/null || echo "(no file)" > "$here/seen"
if [ -e "$here/nginx-fails" ]; then
    echo 'nginx: [emerg] unknown directive "bogus" in {dst}:3' >&2
    echo 'nginx: configuration file /etc/nginx/nginx.conf test failed' >&2
    exit 1
fi
echo 'nginx: configuration file /etc/nginx/nginx.conf test is successful' >&2
"""
SYSTEMCTL = """\
#!/bin/sh
here=$(dirname "$0")
echo "systemctl $*" >> "$here/calls"
if [ -e "$here/systemctl-fails" ]; then
    echo "Job for nginx.service failed." >&2
    exit 1
fi
"""


class Box:
    """A conf.d folder, the rendered file, and stand-in nginx and systemctl first on PATH."""

    def __init__(self, root: Path) -> None:
        self.bin = root / "bin"
        self.bin.mkdir()
        self.confd = root / "conf.d"
        self.confd.mkdir()
        self.src = root / "gpuprov" / "gpuprov-lb.conf"
        self.src.parent.mkdir()
        self.dst = self.confd / "gpuprov-lb.conf"
        for name, text in (("nginx", NGINX), ("systemctl", SYSTEMCTL)):
            path = self.bin / name
            path.write_text(text.format(dst=self.dst))
            path.chmod(0o755)

    def fail(self, what: str) -> None:
        (self.bin / f"{what}-fails").touch()

    def run(self, argv: list[str] | None = None) -> subprocess.CompletedProcess[str]:
        """The script with `argv`, by default SRC DST."""
        env = {**os.environ, "PATH": f"{self.bin}:/usr/bin:/bin"}
        args = [str(self.src), str(self.dst)] if argv is None else argv
        return subprocess.run(
            ["/bin/sh", str(SCRIPT), *args], capture_output=True, text=True, env=env, check=False
        )

    @property
    def calls(self) -> list[str]:
        path = self.bin / "calls"
        return path.read_text().splitlines() if path.exists() else []

    @property
    def seen(self) -> str:
        """conf.d's file as `nginx -t` read it."""
        return (self.bin / "seen").read_text()

    def leftovers(self) -> list[str]:
        return sorted(p.name for p in self.confd.iterdir() if p.name != self.dst.name)


@pytest.fixture
def box(tmp_path: Path) -> Box:
    return Box(tmp_path)


RELOAD = ["nginx -t", "systemctl reload-or-restart nginx.service"]


def test_first_install(box: Box) -> None:
    box.src.write_text("new\n")
    done = box.run()
    assert (done.returncode, done.stdout) == (0, "changed\n"), done.stderr
    assert box.dst.read_text() == "new\n"
    assert box.dst.stat().st_mode & 0o777 == 0o644
    assert box.seen == "new\n"
    assert box.calls == RELOAD
    assert box.leftovers() == []


def test_unchanged_runs_nothing(box: Box) -> None:
    box.src.write_text("same\n")
    box.dst.write_text("same\n")
    inode = box.dst.stat().st_ino
    done = box.run()
    assert (done.returncode, done.stdout) == (0, "unchanged\n"), done.stderr
    assert box.calls == []
    assert box.dst.stat().st_ino == inode


def test_changed_is_renamed_into_place_then_reloaded(box: Box) -> None:
    box.src.write_text("new\n")
    box.dst.write_text("old\n")
    box.dst.chmod(0o600)
    inode = box.dst.stat().st_ino
    done = box.run()
    assert (done.returncode, done.stdout) == (0, "changed\n"), done.stderr
    assert box.dst.read_text() == "new\n"
    assert box.dst.stat().st_ino != inode  # a new file renamed over the old, not rewritten
    assert box.dst.stat().st_mode & 0o777 == 0o644
    assert box.seen == "new\n"  # nginx -t checked the new config
    assert box.calls == RELOAD
    assert box.leftovers() == []


def test_failed_test_restores_the_previous_file(box: Box) -> None:
    box.src.write_text("broken\n")
    box.dst.write_text("old\n")
    box.dst.chmod(0o640)
    box.fail("nginx")
    done = box.run()
    assert done.returncode == 1
    assert done.stdout == ""
    assert 'unknown directive "bogus"' in done.stderr
    assert "the previous" in done.stderr and "not reloaded" in done.stderr
    assert box.seen == "broken\n"
    assert box.dst.read_text() == "old\n"
    assert box.dst.stat().st_mode & 0o777 == 0o640
    assert box.calls == ["nginx -t"]
    assert box.leftovers() == []


def test_failed_first_install_leaves_no_file(box: Box) -> None:
    box.src.write_text("broken\n")
    box.fail("nginx")
    done = box.run()
    assert done.returncode == 1
    assert "test failed" in done.stderr
    assert "is not installed" in done.stderr
    assert not box.dst.exists()
    assert box.calls == ["nginx -t"]
    assert box.leftovers() == []


def test_failed_reload_restores_the_previous_file_and_a_rerun_retries(box: Box) -> None:
    box.src.write_text("new\n")
    box.dst.write_text("old\n")
    box.fail("systemctl")
    done = box.run()
    assert done.returncode == 1
    assert "Job for nginx.service failed." in done.stderr
    assert box.dst.read_text() == "old\n"
    assert box.calls == RELOAD
    assert box.leftovers() == []
    (box.bin / "systemctl-fails").unlink()
    again = box.run()
    assert (again.returncode, again.stdout) == (0, "changed\n"), again.stderr
    assert box.dst.read_text() == "new\n"


@pytest.mark.parametrize("argv", [[], ["only-one"], ["a", "b", "c"]])
def test_usage(box: Box, argv: list[str]) -> None:
    done = box.run(argv)
    assert done.returncode == 2
    assert "usage:" in done.stderr
    assert box.calls == []


def test_missing_source(box: Box) -> None:
    done = box.run([str(box.src.parent / "absent.conf"), str(box.dst)])
    assert done.returncode == 2
    assert "no such file" in done.stderr
    assert box.calls == []
    assert not box.dst.exists()
