"""pyinfra tasks of the nginx_lb role (Ansible: tasks/main.yml).

gpuprov keeps the rendered config in /etc/gpuprov/nginx; the install script copies it into
conf.d only when `nginx -t` accepts it, so a config nginx refuses never replaces one that serves.
The script runs only when the rendered file changes or conf.d's copy differs from it: a rerun
changes nothing. A host whose balancer is turned off loses the conf.d file.
"""

from __future__ import annotations

import shlex
from io import StringIO

from pyinfra.api.deploy import deploy
from pyinfra.context import host
from pyinfra.facts.deb import DebPackages
from pyinfra.facts.files import File
from pyinfra.facts.server import Command
from pyinfra.operations import apt, files, server, systemd

from provision import nginx, retry, stack
from provision.hostplan import HostPlan

FILES = stack.role_path("nginx_lb", "files")
RENDERED = "/etc/gpuprov/nginx/gpuprov-lb.conf"
SCRIPT = "/usr/local/lib/gpuprov/gpuprov-lb-install.sh"
SERVICE = "nginx.service"


@deploy("Load balancer")
def nginx_lb(plan: HostPlan) -> None:
    v = plan.variables
    dest = nginx.path(v["nginx_lb_conf"], "nginx_lb_conf")
    if not plan.stack.balancer.enabled:
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
        server.shell(
            name=f"Install {dest} (nginx -t, then reload)",
            commands=[f"{SCRIPT} {shlex.quote(RENDERED)} {shlex.quote(dest)}"],
        )
