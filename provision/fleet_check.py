"""`gpuprov check INVENTORY`: probe every host over SSH at once and judge each one.

pyinfra connects to every host in parallel and runs the probes as one fact (one round trip per
host), as the gate of plan/apply does; nothing else is read and no stack or secret is needed.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import gevent
from pyinfra.api.config import Config
from pyinfra.api.connect import disconnect_all
from pyinfra.api.facts import get_fact
from pyinfra.api.host import Host
from pyinfra.api.state import State
from pyinfra.context import ctx_host, ctx_state

from checks.facts.model import ContainerImage, HostFacts
from checks.reporting import fleet
from provision import deploy
from provision import gate as gates

ImageReader = Callable[[str, HostFacts], ContainerImage]


def run(
    inventory: str,
    limit: list[str] | None,
    images: list[str],
    read_image: ImageReader,
    progress: Callable[[str], None],
) -> fleet.FleetReport:
    """The fleet report; deploy.InventoryError (exit 2) before any host is contacted."""
    state, loaded, hosts = deploy.load_inventory(inventory, limit)
    state.init(loaded, Config(), initial_limit=hosts)
    state.print_output = False
    started = time.monotonic()
    progress(f"gpuprov: probing {len(hosts)} host(s) from {inventory}")
    try:
        unreachable = deploy.connect(state, hosts)
        connected = [h for h in hosts if h.name not in unreachable]
        outputs = probe(state, connected)
    finally:
        disconnect_all(state)
    results: list[tuple[str, HostFacts | None, str | None]] = []
    for h in hosts:
        if h.name in unreachable:
            results.append((h.name, None, f"could not connect: {unreachable[h.name]}"))
            continue
        output, error = outputs.get(h.name, (None, "not probed"))
        if output is None:
            results.append((h.name, None, f"the probes failed: {error}"))
            continue
        facts = gates.facts_from_output(h.name, output)
        facts.containers.images += [read_image(ref, facts) for ref in images]
        results.append((h.name, facts, None))
    answered = sum(1 for _, facts, _ in results if facts is not None)
    progress(
        f"gpuprov: {answered} of {len(hosts)} host(s) answered in "
        f"{time.monotonic() - started:.1f} s"
    )
    return fleet.build(inventory, results)


def probe(state: State, hosts: list[Host]) -> dict[str, tuple[str | None, str | None]]:
    """Every host's probe output at once; a host whose round trip fails gets its error (the
    others keep theirs)."""
    return on_each(state, hosts, lambda h: get_fact(state, h, gates.Probes))


def on_each(
    state: State, hosts: list[Host], read: Callable[[Host], str]
) -> dict[str, tuple[str | None, str | None]]:
    """`read(host)` on every host at once, in pyinfra's context for it: (output, None), or
    (None, why) for a host whose read failed (a dropped connection, a timeout)."""

    def one(h: Host) -> tuple[str | None, str | None]:
        with ctx_state.use(state), ctx_host.use(h):
            try:
                return read(h), None
            except Exception as exc:  # this host only
                return None, f"{type(exc).__name__}: {exc}"

    spawned = {h.name: state.pool.spawn(one, h) for h in hosts}
    gevent.joinall(list(spawned.values()))
    return {name: g.value if g.successful() else (None, "no answer") for name, g in spawned.items()}
