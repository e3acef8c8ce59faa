"""pyinfra tasks of the nginx_lb role (Ansible: tasks/main.yml).

gpuprov keeps the rendered config in /etc/gpuprov/nginx; the install script copies it into
conf.d only when `nginx -t` accepts it, so a config nginx refuses never replaces one that serves.
The script runs only when the rendered file changes or conf.d's copy differs from it: a rerun
changes nothing. A host whose balancer is turned off loses the conf.d file.

pyinfra diffs only the rendered copy, and not even that when its folder is new (it stops at the
first command, the mkdir). So whenever what nginx serves would change, the plan gets a diff of
conf.d's file as it is on the host against the new config (`HostPlan.balancer_diff`), logged
like pyinfra's own diffs.
"""

from __future__ import annotations

import difflib
import shlex
from io import StringIO

from pyinfra import logger
from pyinfra.api.deploy import deploy
from pyinfra.context import host, state
from pyinfra.facts.deb import DebPackages
from pyinfra.facts.files import File, FileContents
from pyinfra.facts.server import Command
from pyinfra.operations import apt, files, server, systemd

from provision import envsecrets, nginx, retry, stack
from provision.hostplan import HostPlan

FILES = stack.role_path("nginx_lb", "files")
RENDERED = "/etc/gpuprov/nginx/gpuprov-lb.conf"
SCRIPT = "/usr/local/lib/gpuprov/gpuprov-lb-install.sh"
SERVICE = "nginx.service"


def _remove(plan: HostPlan, dest: str) -> None:
    """Take the balancer out of nginx (conf.d's file and the rendered copy), then reload it."""
    if host.get_fact(File, path=dest):
        planned(plan, dest, "")
    for path in (dest, RENDERED):
        if host.get_fact(File, path=path):
            files.file(name=f"Remove {path}", path=path, present=False)
    if host.get_fact(File, path=dest):  # a previous apply installed the balancer
        systemd.service(
            name="Reload nginx without the balancer",
            service=SERVICE,
            running=None,
            reloaded=True,
        )


@deploy("Load balancer removed")
def uninstall(plan: HostPlan) -> None:
    """`gpuprov uninstall`: the balancer and its install script; nginx itself stays."""
    _remove(plan, nginx.path(plan.variables["nginx_lb_conf"], "nginx_lb_conf"))
    if host.get_fact(File, path=SCRIPT):
        files.file(name=f"Remove {SCRIPT}", path=SCRIPT, present=False)


@deploy("Load balancer")
def nginx_lb(plan: HostPlan) -> None:
    v = plan.variables
    dest = nginx.path(v["nginx_lb_conf"], "nginx_lb_conf")
    if not plan.stack.balancer.enabled:
        _remove(plan, dest)
        return
    config = nginx.render(v)  # a bad value stops here, before any operation runs
    if "nginx" not in (host.get_fact(DebPackages) or {}):
        apt.packages(
            name="Install nginx",
            packages=["nginx"],
            update=True,
            _retries=retry.ATTEMPTS,
            _retry_delay=retry.DELAY,
        )
    systemd.service(name=f"Run {SERVICE}", service=SERVICE, running=True, enabled=True)
    files.put(
        name="Balancer install script",
        src=str(FILES / "gpuprov-lb-install.sh"),
        dest=SCRIPT,
        mode="755",
        create_remote_dir=True,
    )
    rendered = files.put(
        name="Balancer config (rendered)",
        src=StringIO(config),
        dest=RENDERED,
        mode="644",
        create_remote_dir=True,
    )
    same = f"if cmp -s {shlex.quote(RENDERED)} {shlex.quote(dest)}; then echo same; fi"
    if rendered.changed or host.get_fact(Command, command=same) != "same":
        planned(plan, dest, config)
        server.shell(
            name=f"Install {dest} (nginx -t, then reload)",
            commands=[f"{SCRIPT} {shlex.quote(RENDERED)} {shlex.quote(dest)}"],
        )


def planned(plan: HostPlan, dest: str, config: str) -> None:
    """Record (and, when pyinfra diffs, log) how `dest` on the host would become `config`
    ("": removed)."""
    found = host.get_fact(File, path=dest)
    serving = (host.get_fact(FileContents, path=dest) or []) if found else None  # [] if empty
    plan.balancer_diff = config_diff(dest, serving, config) or None
    if plan.balancer_diff and state.config.DIFF:
        host.log(f"Will change {dest}, the config nginx serves:", logger.info)
        for line in plan.balancer_diff.splitlines():
            logger.info("  %s", line)
        logger.info("")


def config_diff(dest: str, serving: list[str] | None, config: str) -> str:
    """A unified diff from `serving` (the lines of `dest` on the host; None: no such file) to
    `config` ("": the file goes), with every known secret masked; "" when nothing changes."""
    lines = difflib.unified_diff(
        [f"{line}\n" for line in serving or []],
        [f"{line}\n" for line in config.splitlines()],
        f"{dest} (on the host)" if serving is not None else "/dev/null",
        f"{dest} (from gpuprov)" if config else "/dev/null",
    )
    return envsecrets.scrub("".join(lines))
