"""pyinfra tasks of the canary role (Ansible: tasks/main.yml)."""

from __future__ import annotations

import dataclasses
from io import StringIO

from pyinfra.api.deploy import deploy
from pyinfra.context import host
from pyinfra.facts.deb import DebPackages
from pyinfra.facts.files import Directory, File
from pyinfra.operations import apt, files, systemd

from provision import retry, stack, templates
from provision.hostplan import HostPlan

FILES = stack.role_path("canary", "files")
UNITS = "/etc/systemd/system"
TIMER = "gpuprov-canary.timer"
SERVICE = "gpuprov-canary.service"
NODE_EXPORTER = "prometheus-node-exporter"
NODE_EXPORTER_ARGS = "/etc/default/prometheus-node-exporter"
TEXTFILE_FLAG = "--collector.textfile.directory"
TEXTFILE = "gpuprov_canary.prom"  # the canary's --metrics-dir file (files/gpuprov_canary.py)


@deploy("Canary")
def canary(plan: HostPlan) -> None:
    v = plan.variables
    if not plan.stack.canary.enabled or not (plan.stack.profiles or plan.stack.vllm.replicas):
        if host.get_fact(File, path=f"{UNITS}/{TIMER}"):
            systemd.service(name="Stop the canary", service=TIMER, running=False, enabled=False)
        return
    if "python3-requests" not in (host.get_fact(DebPackages) or {}):
        apt.packages(
            name="Install python3-requests",
            packages=["python3-requests"],
            update=True,
            _retries=retry.ATTEMPTS,
            _retry_delay=retry.DELAY,
        )
    profiles = [dataclasses.asdict(p) for p in plan.stack.profiles]
    replicas = [dataclasses.asdict(r) for r in plan.stack.vllm.replicas]
    ops = [
        files.put(
            name="Canary script",
            src=str(FILES / "gpuprov_canary.py"),
            dest=v["canary_script"],
            mode="755",
            create_remote_dir=True,
        ),
        files.put(
            name="Canary targets",
            src=StringIO(
                templates.render(
                    "canary", "canary.tsv.j2", profiles=profiles, replicas=replicas, **v
                )
            ),
            dest=v["canary_config"],
            mode="644",
            create_remote_dir=True,
        ),
    ]
    units = [
        files.put(
            name=f"Unit {name}",
            src=StringIO(
                templates.render("canary", f"{name}.j2", profiles=profiles, replicas=replicas, **v)
            ),
            dest=f"{UNITS}/{name}",
            mode="644",
        )
        for name in ("gpuprov-canary.service", TIMER)
    ]
    if any(op.changed for op in units):
        systemd.daemon_reload(name="Reload systemd units")
    systemd.service(
        name=f"Run {TIMER}",
        service=TIMER,
        running=True,
        enabled=True,
        restarted=any(op.changed for op in units + ops),
    )
    if plan.stack.canary.metrics_dir:
        files.directory(
            name="Canary metrics folder", path=plan.stack.canary.metrics_dir, mode="755"
        )
    if plan.stack.canary.node_exporter:
        node_exporter(plan.stack.canary.metrics_dir)


def node_exporter(metrics_dir: str) -> None:
    """Debian's prometheus-node-exporter (port 9100), its textfile collector reading
    `metrics_dir` (ARGS in its EnvironmentFile; Ansible: the same line with lineinfile)."""
    if NODE_EXPORTER not in (host.get_fact(DebPackages) or {}):
        apt.packages(
            name=f"Install {NODE_EXPORTER}",
            packages=[NODE_EXPORTER],
            update=True,
            _retries=retry.ATTEMPTS,
            _retry_delay=retry.DELAY,
        )
    args = files.line(
        name="Point node_exporter's textfile collector at the canary's metrics",
        path=NODE_EXPORTER_ARGS,
        line="^ARGS=.*$",
        replace=f'ARGS="{TEXTFILE_FLAG}={metrics_dir}"',
    )
    systemd.service(
        name=f"Run {NODE_EXPORTER}",
        service=f"{NODE_EXPORTER}.service",
        running=True,
        enabled=True,
        restarted=args.changed,
    )


@deploy("Canary removed")
def uninstall(plan: HostPlan) -> None:
    """`gpuprov uninstall`: the timer and its service, the script, its targets and its state."""
    v = plan.variables
    present = [u for u in (TIMER, SERVICE) if host.get_fact(File, path=f"{UNITS}/{u}")]
    for unit in present:
        systemd.service(name=f"Stop {unit}", service=unit, running=False, enabled=False)
        files.file(name=f"Remove {unit}", path=f"{UNITS}/{unit}", present=False)
    if present:
        systemd.daemon_reload(name="Reload systemd units")
    textfile = f"{plan.stack.canary.metrics_dir}/{TEXTFILE}"
    paths = [v["canary_script"], v["canary_config"]]
    for path in paths + ([textfile] if plan.stack.canary.metrics_dir else []):
        if host.get_fact(File, path=path):
            files.file(name=f"Remove {path}", path=path, present=False)
    if host.get_fact(Directory, path=v["canary_state_dir"]):
        files.directory(
            name=f"Remove {v['canary_state_dir']}", path=v["canary_state_dir"], present=False
        )
