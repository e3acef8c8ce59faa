"""Converge hosts with pyinfra: load and validate the inventory, lock, gate, plan, apply.

`plan` and `apply` share every step up to execution, so what `plan` shows is what `apply` runs.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import importlib.util
import logging
import socket
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import gevent
from pyinfra.api import output
from pyinfra.api.config import Config
from pyinfra.api.connect import disconnect_all
from pyinfra.api.deploy import add_deploy, deploy
from pyinfra.api.exceptions import ConnectError, PyinfraError
from pyinfra.api.facts import get_facts
from pyinfra.api.host import Host
from pyinfra.api.inventory import Inventory
from pyinfra.api.operation import OperationMeta
from pyinfra.api.operations import run_ops
from pyinfra.api.state import State
from pyinfra.context import host as current_host
from pyinfra.facts.server import Command

from checks.facts.model import HostFacts
from provision import gate as gates
from provision import host_shell, lock, nginx, role_table, servicefacts, stack, verify
from provision.hostplan import HostPlan, secrets

log = logging.getLogger("gpuprov")


class InventoryError(Exception):
    """A bad inventory: names the file, the host and the field. Exit 2, nothing touched."""


@dataclass
class OpResult:
    name: str
    status: str  # changed, unchanged, failed, not run


@dataclass
class HostOutcome:
    name: str
    gate: gates.HostGate | None = None
    skipped: str = ""
    ops: list[OpResult] = field(default_factory=list)
    verification: verify.Verification | None = None

    @property
    def changed(self) -> int:
        return sum(op.status == "changed" for op in self.ops)

    @property
    def failed(self) -> bool:
        return any(op.status == "failed" for op in self.ops)

    @property
    def converged(self) -> bool:
        """Nothing failed, and where apply checked the host, its units run and answer."""
        ok = self.verification is None or self.verification.ok
        return not (self.skipped or self.failed) and ok


@dataclass
class Run:
    """One plan or apply over an inventory."""

    inventory_path: str
    state: State
    plans: dict[str, HostPlan]
    outcomes: dict[str, HostOutcome]
    unreachable: dict[str, str] = field(default_factory=dict)  # host name: why
    stacks: dict[str, tuple[stack.Stack, dict[str, Any]]] = field(default_factory=dict)


def load_inventory(
    path: str, limit: list[str] | None = None
) -> tuple[State, Inventory, list[Host]]:
    """Load a pyinfra inventory file; `limit` selects hosts by name or group (globs allowed).

    The returned State is not initialised yet: pyinfra loads inventory files inside one.
    """
    from pyinfra.context import ctx_state
    from pyinfra_cli.exceptions import UnexpectedExternalError
    from pyinfra_cli.inventory import make_inventory
    from pyinfra_cli.util import exec_file

    file = Path(path)
    if not file.is_file():
        raise InventoryError(f"{path}: no such inventory file")
    state = State()
    ctx_state.set(state)
    try:
        check_groups(path, exec_file(str(file), return_locals=True))
        inventory = make_inventory(str(file), cwd=str(file.parent))
    except InventoryError:
        raise
    except Exception as exc:  # the file is user code: any error is a bad inventory
        error = exc.exception if isinstance(exc, UnexpectedExternalError) else exc
        raise InventoryError(f"{path}: cannot load: {type(error).__name__}: {error}") from exc
    hosts = list(inventory)
    if not hosts:
        raise InventoryError(f"{path}: no hosts")
    if limit:
        hosts = [h for h in hosts if any(_matches(h, pattern) for pattern in limit)]
        if not hosts:
            raise InventoryError(f"{path}: --limit {','.join(limit)} matches no host")
    return state, inventory, hosts


def check_groups(path: str, names: Mapping[str, Any]) -> None:
    """Refuse a module-level value of an inventory file that pyinfra would misread as hosts.

    pyinfra reads every public list or tuple there as a group: a list of hosts (each a name or a
    (name, data dict) pair), or a tuple ([hosts], {group data}). Any other tuple, such as
    `PORTS = (8080, 8081)` or `x = ("a", "b")`, would become bogus hosts or a cryptic error.
    Lists that hold no hosts at all are left to pyinfra, which ignores them with a warning.
    """
    for name, value in names.items():
        if name.startswith("_") or not isinstance(value, (list, tuple)):
            continue
        if isinstance(value, tuple):
            if not (len(value) == 2 and isinstance(value[0], list) and isinstance(value[1], dict)):
                raise InventoryError(
                    f"{path}: {name} = {_short(value)}: a module-level tuple is read as a host "
                    "group ([hosts], {group data}) and this is not one; write hosts as a list, "
                    f"or name the variable _{name} to keep it out of the inventory"
                )
            value = value[0]
        if not all(isinstance(item, (str, tuple)) for item in value):
            continue
        for i, item in enumerate(value):
            if isinstance(item, tuple) and not (
                len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], dict)
            ):
                raise InventoryError(
                    f"{path}: {name}[{i}] = {_short(item)}: a host is a name or a "
                    "(name, {host data}) pair"
                )


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _matches(host: Host, pattern: str) -> bool:
    return fnmatch.fnmatch(host.name, pattern) or any(
        fnmatch.fnmatch(g, pattern) for g in host.groups
    )


def validate(
    path: str, hosts: list[Host], need_secrets: bool = True
) -> dict[str, tuple[stack.Stack, dict[str, Any]]]:
    """Every selected host's stack, or InventoryError naming file, host and field.

    An unknown key with a role's prefix is an error; any other key that neither a role nor
    pyinfra knows is a warning on stderr, once per key, naming the closest known name.
    """
    out = {}
    warned: set[str] = set()
    for h in hosts:
        data = h.data.dict()
        unknown = stack.unknown(data, pyinfra_keys())
        typos = [k for k in unknown if k.startswith(role_table.PREFIXES)]
        for key in sorted(set(unknown) - set(typos) - warned):
            warned.add(key)
            hint = f" (did you mean {unknown[key]!r}?)" if unknown[key] else ""
            print(
                f"gpuprov: warning: {path}: host {h.name!r}: {key!r} is no setting gpuprov or "
                f"pyinfra knows, ignored{hint}",
                file=sys.stderr,
            )
        try:
            if typos:
                raise stack.StackError(typos[0], "unknown setting")
            host_stack = stack.from_data(data)
            if need_secrets:
                secrets(host_stack)
            variables = stack.variables(data)
            if host_stack.balancer.enabled:
                nginx.render(variables)  # every balancer value, as nginx reads it
        except stack.StackError as exc:
            raise InventoryError(f"{path}: host {h.name!r}: {exc}") from exc
        out[h.name] = (host_stack, variables)
    return out


@functools.cache
def pyinfra_keys() -> frozenset[str]:
    """Host data keys pyinfra reads itself: every connector's data (ssh_user, ...) and the
    operation arguments a host may set (_sudo, ...)."""
    from pyinfra.api.arguments import all_global_arguments
    from pyinfra.api.connectors import get_all_connectors

    keys = {name for name, _ in all_global_arguments()}
    for connector in get_all_connectors().values():
        keys.update(getattr(connector, "data_meta", None) or {})
    return frozenset(keys)


def start(path: str, limit: list[str] | None, diff: bool, need_secrets: bool = True) -> Run:
    """Load, validate and connect; InventoryError before any host is touched. `gate` follows
    (for apply, once the hosts' locks are held)."""
    state, inventory, hosts = load_inventory(path, limit)
    stacks = validate(path, hosts, need_secrets)
    state.init(inventory, Config(DIFF=diff), initial_limit=hosts)
    state.print_output = False
    unreachable = connect(state, hosts)
    outcomes = {h.name: HostOutcome(h.name) for h in hosts}
    for h in hosts:
        if h.name in unreachable:
            outcomes[h.name].skipped = f"could not connect: {unreachable[h.name]}"
        elif problem := host_shell.privilege_problem(h):
            outcomes[h.name].skipped = problem
            with contextlib.suppress(PyinfraError):  # raised once no host remains
                state.fail_hosts({h})
    return Run(path, state, {}, outcomes, unreachable, stacks)


def gate(run: Run) -> None:
    """Probe and judge every host still in the run, and plan what it gets."""
    hosts = list(run.state.inventory.iter_activated_hosts())
    connected = [h for h in hosts if h.name in run.outcomes and not run.outcomes[h.name].skipped]
    outputs = get_facts(run.state, gates.Probes) if connected else {}
    for h in connected:
        host_stack, variables = run.stacks[h.name]
        facts = gates.facts_from_output(h.name, outputs.get(h) or "")
        verdict = gates.judge(h.name, facts, host_stack)
        if host_stack.vllm.replicas or host_stack.profiles:
            build = verdict.plan.name if verdict.plan is not None else ""
            script = servicefacts.script(host_stack, verdict.image, build)
            text = h.get_fact(Command, command=script) or ""
            found = servicefacts.parse(host_stack, verdict.image, text, build)
            gates.judge_services(verdict, host_stack, found)
        run.outcomes[h.name].gate = verdict
        run.plans[h.name] = HostPlan(h.name, host_stack, variables, verdict, secrets(host_stack))


def connect(state: State, hosts: list[Host]) -> dict[str, str]:
    """Connect to every host at once; why each host that could not be reached was not.

    The others stay active whatever the number of unreachable ones.
    """
    reasons: dict[str, str] = {}
    unexpected: list[Exception] = []

    def one(h: Host) -> None:
        try:
            h.connect(show_errors=False, raise_exceptions=True)
        except ConnectError as exc:
            reasons[h.name] = connect_reason(exc)
        except Exception as exc:  # raised below, not printed by gevent's hub
            unexpected.append(exc)

    gevent.joinall([state.pool.spawn(one, h) for h in hosts])
    if unexpected:
        raise unexpected[0]
    failed = set()
    for h in hosts:
        if h.connected:
            state.activate_host(h)
        else:
            failed.add(h)
            reasons.setdefault(h.name, "not connected")
    with contextlib.suppress(PyinfraError):  # raised once no host remains
        state.fail_hosts(failed, activated_count=len(hosts))
    return {h.name: reasons[h.name] for h in hosts if h in failed}


def connect_reason(exc: ConnectError) -> str:
    """What stopped a connection: the system's words for a socket error (timed out, Connection
    refused, No route to host), else pyinfra's message (authentication, host key, name lookup)."""
    cause = exc.__cause__ or exc.__context__
    if isinstance(cause, OSError) and not isinstance(cause, socket.gaierror):
        errors = getattr(cause, "errors", None)  # paramiko: one error per address tried
        found = list(errors.values()) if isinstance(errors, dict) and errors else [cause]
        texts = [getattr(e, "strerror", None) or str(e) or type(e).__name__ for e in found]
        return "; ".join(dict.fromkeys(texts))
    return str(exc.args[0]) if exc.args else type(exc).__name__


def roles() -> dict[str, ModuleType]:
    """The roles' pyinfra task modules (roles/<role>/tasks/<role>.py)."""
    loaded = {}
    for name in role_table.NAMES:
        path = role_table.role_path(name, "tasks", f"{name}.py")
        spec = importlib.util.spec_from_file_location(f"gpuprov_roles.{name}", path)
        assert spec and spec.loader
        module = sys.modules.get(spec.name) or importlib.util.module_from_spec(spec)
        if spec.name not in sys.modules:
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        loaded[name] = module
    return loaded


def run_roles(plan: HostPlan, modules: Mapping[str, ModuleType]) -> None:
    """Each role's pyinfra entry in table order, where its `when` holds for the host; where it
    does not, the role's `remove` (if it has one) takes away what an earlier apply installed."""
    results: dict[str, Any] = {}
    for role in role_table.ROLES:
        if role_table.runs(role, plan.variables):
            entry = getattr(modules[role.name], role.name)
            results[role.name] = entry(plan, *(results[name] for name in role.takes))
        elif (remove := getattr(modules[role.name], "remove", None)) is not None:
            remove(plan)


def add_operations(run: Run, force: bool, prune_builds: int = 0) -> None:
    """Generate every host's operations (pyinfra reads the facts it needs and diffs files)."""
    r = roles()
    for plan in run.plans.values():
        plan.force = force
        plan.prune_builds = prune_builds
    for outcome in run.outcomes.values():
        verdict = outcome.gate
        if outcome.skipped or verdict is None:
            continue
        if verdict.problems:
            outcome.skipped = "; ".join(verdict.problems)
        elif verdict.blocked and not force:
            rules = ", ".join(dict.fromkeys(f.rule for f in verdict.blockers()))
            outcome.skipped = f"blocked by {rules} (use --force to apply anyway)"

    _generate(run, "gpuprov", lambda plan: run_roles(plan, r))


def _generate(run: Run, name: str, operations: Callable[[HostPlan], None]) -> None:
    """pyinfra generates `operations(plan)` on every host still in the run (reading the facts
    they need and diffing files); what each would change is recorded in its outcome."""

    @deploy(name)
    def each_host() -> None:
        plan = run.plans.get(current_host.name)
        if plan is None or run.outcomes[plan.name].skipped:
            return
        operations(plan)

    try:
        add_deploy(run.state, each_host)
    except PyinfraError as exc:  # every host failed while its operations were generated
        log.error("%s", exc)
    for h in run.state.failed_hosts:
        if h.name in run.outcomes and not run.outcomes[h.name].skipped:
            run.outcomes[h.name].skipped = "reading its state failed (see the errors above)"
    _record(run, lambda meta: "will change" if meta.changed else "unchanged")


def add_removals(run: Run) -> None:
    """Every host's `gpuprov uninstall` operations: each role's `uninstall`, last role first.
    No gate: what is removed does not depend on the host's GPUs or driver."""
    r = roles()
    for name, (host_stack, variables) in run.stacks.items():
        if name in run.outcomes and not run.outcomes[name].skipped:
            empty = gates.HostGate(name, HostFacts())
            run.plans[name] = HostPlan(name, host_stack, variables, empty)

    def remove_all(plan: HostPlan) -> None:
        for role in reversed(role_table.ROLES):
            uninstall = getattr(r[role.name], "uninstall", None)
            if uninstall is not None:
                uninstall(plan)

    _generate(run, "gpuprov uninstall", remove_all)


def execute(run: Run) -> None:
    """Run the generated operations, each host on its own, then record what happened."""
    run.state.print_output = True
    output.set_echo(_echo)  # pyinfra's API prints command output only through this hook
    hub = gevent.get_hub()
    if PyinfraError not in hub.NOT_ERROR:  # a failed host is reported below, once
        hub.NOT_ERROR = (*hub.NOT_ERROR, PyinfraError)
    try:
        run_ops(run.state, no_wait=True)
    except PyinfraError as exc:
        log.error("%s", exc)
    _record(run, _run_status)
    for h in run.state.failed_hosts:
        outcome = run.outcomes.get(h.name)
        if outcome is not None and not outcome.skipped and not outcome.failed:
            outcome.ops.append(OpResult("host failed", "failed"))


def check(run: Run, settle: float, progress: Callable[[str], None]) -> None:
    """The post-apply check of every host whose operations all succeeded."""
    hosts = {
        h: run.plans[h.name]
        for h in run.state.inventory.iter_activated_hosts()
        if h.name in run.plans
        and not run.outcomes[h.name].skipped
        and not run.outcomes[h.name].failed
    }
    if hosts:
        progress(f"gpuprov: checking that the services run ({settle:.0f}s settle period)")
    for name, result in verify.verify_all(hosts, settle, progress).items():
        run.outcomes[name].verification = result


def _run_status(meta: OperationMeta) -> str:
    if not meta.is_complete():
        return "not run"
    if not meta.did_succeed(_raise_if_not_complete=False):
        return "failed"
    return "changed" if meta.did_change() else "unchanged"


def _record(run: Run, status: Callable[[OperationMeta], str]) -> None:
    """Each host's operations, in order, with `status` of each (replacing what was recorded)."""
    for h in run.state.inventory.iter_activated_hosts():
        outcome = run.outcomes.get(h.name)
        if outcome is None or outcome.skipped:
            continue
        outcome.ops = [
            OpResult(_op_name(run.state.get_op_meta(op_hash).names), status(data.operation_meta))
            for op_hash in run.state.get_op_order()
            if (data := run.state.ops[h].get(op_hash)) is not None
        ]


def _echo(message: Any = None, err: bool = False, **_: Any) -> None:
    print("" if message is None else message, file=sys.stderr, flush=True)  # stdout: --json


def _op_name(names: set[str]) -> str:
    """An operation's own name, without the deploys it sits in ("gpuprov | llama.cpp | ...")."""
    return ", ".join(sorted(n.rsplit(" | ", 1)[-1] for n in names))


def finish(run: Run) -> None:
    disconnect_all(run.state)


@contextmanager
def locked(run: Run, timeout: float, progress: Callable[[str], None]) -> Iterator[None]:
    """Hold every reachable host's apply lock for the duration of the block; a host whose lock
    another apply keeps is left out of the run. Taken before `gate`, so what the gate sees is
    what the apply changes."""
    held: list[Host] = []
    token = lock.token()
    try:
        for h in run.state.inventory.iter_activated_hosts():
            outcome = run.outcomes.get(h.name)
            if outcome is None or outcome.skipped:
                continue
            began = time.monotonic()
            ok, detail = lock.acquire(h, token, timeout, progress)
            if ok:
                held.append(h)
                waited = time.monotonic() - began
                if waited > 1:
                    progress(f"{h.name}: got the apply lock after {waited:.0f}s")
            else:
                outcome.skipped = detail
                with contextlib.suppress(PyinfraError):  # raised once no host remains
                    run.state.fail_hosts({h})
        yield
    finally:
        for h in held:
            lock.release(h, token)
