"""`gpuprov status INVENTORY`: what runs on every host against what the inventory plans.

It takes plan's path (connect, the gate, the operations apply would run: none is run) and reads
each host once more with provision.status's script. Drift is what plan would change for a
service (its unit or EnvironmentFile edited or outdated), a service not running, or a newer
llama.cpp build waiting.
"""

from __future__ import annotations

from pyinfra.api.host import Host
from pyinfra.facts.server import Command

from checks.reporting.status import HostStatus, ServiceStatus, StatusReport
from provision import deploy, fleet_check, status
from provision.gate import HostGate
from provision.stack import Stack


def run(inventory: str, limit: list[str] | None) -> StatusReport:
    """The report; deploy.InventoryError before any host is contacted."""
    plan = deploy.start(inventory, limit, diff=False)
    try:
        deploy.gate(plan)
        deploy.add_operations(plan, force=True)  # every host's would-be changes, blocked or not
        hosts = [
            h
            for h in plan.state.inventory.iter_activated_hosts()
            if h.name in plan.plans and not plan.outcomes[h.name].skipped
        ]

        def read(h: Host) -> str:
            stack = plan.plans[h.name].stack
            text = h.get_fact(Command, command=status.script(stack, stack.vllm.engine))
            return str(text or "")

        texts = fleet_check.on_each(plan.state, hosts, read)
    finally:
        deploy.finish(plan)
    out = []
    for name, outcome in plan.outcomes.items():
        text, error = texts.get(name, (None, outcome.skipped or "not read"))
        if text is None:
            out.append(HostStatus(name, error, [], [], None, None, []))
            continue
        host_plan = plan.plans[name]
        changes = [op.name for op in outcome.ops if op.status == "will change"]
        out.append(host_status(name, host_plan.stack, outcome.gate, status.parse(text), changes))
    return StatusReport(inventory, out)


def host_status(
    name: str,
    stack: Stack,
    gate: HostGate | None,
    found: status.HostState,
    changes: list[str],
) -> HostStatus:
    """One host's services, judged against its stack and what plan would change there."""
    planned_build = gate.plan.name if gate is not None and gate.plan is not None else None
    planned_mib = _planned(gate)
    services = []
    managed = status.managed(stack)
    for s in managed:
        unit = found.units.get(s.unit)
        installed = unit is not None and unit.load not in (None, "not-found")
        state = (
            f"{unit.active} ({unit.sub})" if installed and unit and unit.active else "not installed"
        )
        drift = [c for c in changes if _about(c, s)]
        socket = found.units.get(s.socket) if s.socket else None
        if s.socket and (socket is None or socket.active != "active"):
            shown = f"{socket.active} ({socket.sub})" if socket and socket.active else "missing"
            drift.append(f"its socket {s.socket} is not listening ({shown})")
        idle = bool(s.socket) and installed and unit is not None and unit.active == "inactive"
        if idle:
            state = "idle (on demand)"
        elif installed and unit and unit.active not in ("active", "activating"):
            drift.append(f"not running ({state})")
        if not installed:
            drift.append("not installed: apply installs it")
        runs = None
        if s.kind == "llama":
            runs = found.current
            if planned_build and found.current and planned_build != found.current:
                drift.append(f"a newer build is planned: {planned_build}")
        elif s.kind == "vllm":
            runs = found.containers.get(s.container)
        held = found.gpu_mib.get(s.container or s.unit) if s.kind in ("llama", "vllm") else None
        services.append(
            ServiceStatus(
                service=s.name,
                unit=s.unit,
                kind=s.kind,
                state=state,
                since=unit.since if unit else None,
                restarts=unit.restarts if unit else None,
                restarts_last_hour=unit.restarts_last_hour if unit else None,
                canary=status.last_canary(found.canary, s.unit) if s.kind != "canary" else None,
                runs=runs,
                vram_used_mib=held,
                vram_planned_mib=planned_mib.get(s.unit),
                drift=drift,
            )
        )
    known = {s.unit for s in managed} | {s.socket for s in managed if s.socket}
    known |= {f"{s.unit.removesuffix('.service')}-proxy.service" for s in managed if s.socket}
    stale = sorted(
        u for u in found.units if u.startswith("gpuprov-") and u not in known | _canary_units()
    )
    return HostStatus(
        name, None, services, stale, found.current, planned_build, sorted(found.builds)
    )


def _canary_units() -> set[str]:
    return {status.CANARY_UNIT, "gpuprov-canary.timer"}


def _about(change: str, service: status.Service) -> bool:
    """Whether an operation plan would run concerns `service` ("Unit gpuprov-llama-a.service",
    "EnvironmentFile of a (0600)", "Restart ...")."""
    return service.unit in change or f" of {service.name} " in f"{change} "


def _planned(gate: HostGate | None) -> dict[str, float]:
    """MiB the VRAM budget counts per unit, over every GPU."""
    out: dict[str, float] = {}
    if gate is None or gate.budget is None:
        return out
    for row in gate.budget.rows:
        for holder in row.holders:
            if holder.mib is not None:
                out[holder.service] = out.get(holder.service, 0.0) + holder.mib
    return out
