"""The gpuprov command line: check, facts, rules, explain, fit, plan, apply (and testhost).

Exit codes: 0 clean, 1 a finding reached --fail-on, 2 usage errors or unreadable input, 3 an
internal error (one line; `gpuprov --debug ...` shows its traceback).
"""

from __future__ import annotations

import copy
import sys
import traceback
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from checks.facts.model import ContainerImage, HostFacts
from checks.reporting.ci_subjects import Subject
from provision import bench_cli, ci_output, fit_cli
from provision.ci_output import FormatOption
from provision.output import Explanation, Facts, Rules, emit, printable

if TYPE_CHECKING:
    pass

INTERNAL_ERROR = 3
_debug = {"on": False}  # set by --debug, read when an unexpected exception ends the command


def internal_error(exc: Exception, debug: bool) -> None:
    """Print an unexpected exception as one line on stderr, or with its traceback under --debug.

    Secrets read from the environment are masked in either, and control characters shown as
    escapes.
    """
    from provision.envsecrets import scrub

    if debug:
        trace = scrub("".join(traceback.format_exception(exc)))
        print(printable(trace, limit=None, lines=True), end="", file=sys.stderr)
    message = printable(" ".join(scrub(str(exc)).splitlines()))
    line = f"gpuprov: internal error: {type(exc).__name__}" + (f": {message}" if message else "")
    print(line if debug else f"{line}; rerun with --debug for the traceback", file=sys.stderr)


class _Group(TyperGroup):
    """The command group: an exception click did not handle ends as one line and exit 3."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        _debug["on"] = False
        try:
            return super().main(*args, **kwargs)
        except Exception as exc:  # usage errors, Exit and Abort are SystemExit by now
            if not kwargs.get("standalone_mode", True):
                raise
            internal_error(exc, _debug["on"])
            sys.exit(INTERNAL_ERROR)


app = typer.Typer(
    name="gpuprov",
    help="Check, explain and provision NVIDIA GPU boxes for LLM inference.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    cls=_Group,
)


def _version(value: bool) -> None:
    if value:
        from importlib import metadata

        try:
            print(f"gpuprov {metadata.version('gpuprov')}")
        except metadata.PackageNotFoundError:
            print("gpuprov (not installed: run it from an installed package)")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
    debug: Annotated[
        bool, typer.Option("--debug", help="Show the traceback of an internal error (exit 3).")
    ] = False,
) -> None:
    """Check, explain and provision NVIDIA GPU boxes for LLM inference."""
    _debug["on"] = debug


class FailOn(str, Enum):
    error = "error"
    warning = "warning"
    info = "info"
    never = "never"


FromOption = Annotated[
    list[str] | None,
    typer.Option(
        "--from",
        help="Build the facts from captured outputs or a facts JSON instead of probing "
        "('-' reads stdin). Several files merge into one host.",
        metavar="FILE...",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON (versioned schema).")]
RedactOption = Annotated[
    bool, typer.Option("--redact", help="Drop serials, UUIDs and hostnames from the output.")
]


def _fail(message: str) -> typer.Exit:
    print(f"gpuprov: {printable(message)}", file=sys.stderr)
    return typer.Exit(2)


def _facts(sources: list[str] | None) -> HostFacts:
    if sources:
        from checks.facts import capture

        try:
            return capture.load(sources)
        except capture.CaptureError as exc:
            raise _fail(str(exc)) from None
    from checks.facts import gather

    return gather.gather()


def _image(ref: str, facts: HostFacts, here: bool) -> ContainerImage:
    """The image's config; exit 2 with the reason. For this machine (`here`), its own engine's
    copy first: what it would run. For another (captures, an inventory's hosts), the registry
    first: what that machine would pull; the local copy only when the registry cannot be read."""
    import platform

    from checks.facts import image_config

    def local() -> ContainerImage | None:
        found = image_config.from_local_engine(ref)
        if found is not None:
            found.ref = ref
        return found

    try:
        image_config.parse_reference(ref)
        if here and (found := local()) is not None:
            return found
        machine = facts.system.machine or platform.machine()
        architecture = image_config.ARCHITECTURES.get(machine, machine)
        print(f"gpuprov: reading {ref} from its registry ({architecture})", file=sys.stderr)
        try:
            return image_config.from_registry(ref, architecture)
        except image_config.ImageConfigError as exc:
            if here or (found := local()) is None:
                raise
            print(f"gpuprov: {exc}; judging this machine's copy of {ref}", file=sys.stderr)
            return found
    except image_config.ImageConfigError as exc:
        raise _fail(f"--image {ref}: {exc}") from None


@app.command()
def check(
    inventory: Annotated[
        str | None,
        typer.Argument(
            help="A pyinfra inventory: check every host in it over SSH (no stack or secrets "
            "needed). Without it, this host (or --from captures).",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[
        list[str] | None,
        typer.Option("--limit", help="With an inventory: only these hosts or groups (globs)."),
    ] = None,
    from_: FromOption = None,
    json_: JsonOption = False,
    fail_on: Annotated[
        FailOn, typer.Option("--fail-on", help="Exit 1 when a finding is this severe or worse.")
    ] = FailOn.error,
    redact: RedactOption = False,
    format_: FormatOption = None,
    image: Annotated[
        list[str] | None,
        typer.Option(
            "--image",
            help="Also judge this image for the host, before pulling it: its config is read "
            "from this machine's docker/podman, else from its registry (no layers); for "
            "captures or an inventory, from the registry first. Repeatable.",
            metavar="REF",
        ),
    ] = None,
) -> None:
    """Check this host (or captured outputs, or every host of an inventory) against the
    known-bad matrix. Exit 1 when a finding reaches --fail-on, or a host could not be checked."""
    from checks.matrix import engine
    from checks.reporting import report

    if json_ and format_ is not None:
        raise _fail("--json and --format are alternatives: give one")
    if inventory is not None:
        raise typer.Exit(
            _check_fleet(inventory, limit, from_, image or [], json_, fail_on, redact, format_)
        )
    if limit:
        raise _fail("--limit selects hosts of an inventory: give the inventory file first")
    facts = _facts(from_)
    for ref in image or []:
        facts.containers.images.append(_image(ref, facts, here=not from_))
    result = report.build(facts)
    if format_ is not None:
        name = ", ".join(from_) if from_ else (result.facts.system.hostname or "localhost")
        ci_output.emit(format_, [Subject(name, "host", result.findings)], "gpuprov check", None)
    else:
        emit(result, json_, redact)
    if engine.reaches(result.findings, fail_on.value):
        raise typer.Exit(1)


def _check_fleet(
    inventory: str,
    limit: list[str] | None,
    from_: list[str] | None,
    images: list[str],
    json_: bool,
    fail_on: FailOn,
    redacted: bool,
    format_: ci_output.CiFormat | None = None,
) -> int:
    from checks.matrix import engine
    from provision import converge_cli, deploy, fleet_check
    from provision.redact import anonymised

    if from_:
        raise _fail("--from describes one host; it cannot be combined with an inventory")
    converge_cli.pyinfra_logging(False)
    read: dict[tuple[str, str | None], ContainerImage] = {}

    def image_for(ref: str, facts: HostFacts) -> ContainerImage:
        """Each image is read once per architecture, however many hosts share it."""
        key = (ref, facts.system.machine)
        if key not in read:
            read[key] = _image(ref, facts, here=False)
        return copy.deepcopy(read[key])

    try:
        result = fleet_check.run(
            inventory, limit, images, image_for, lambda m: print(m, file=sys.stderr, flush=True)
        )
    except deploy.InventoryError as exc:
        raise _fail(str(exc)) from None
    shown = anonymised(result) if redacted else result
    if format_ is not None:
        subjects = [Subject(h.name, "host", h.findings, h.error) for h in shown.hosts]
        ci_output.emit(format_, subjects, "gpuprov check", inventory)
    elif json_:
        emit(shown, True)  # anonymised already: a second pass would take host1.. for hostnames
    else:
        emit(result, False, redacted)  # the text view anonymises it itself
    failed = engine.reaches(result.findings(), fail_on.value)
    return 1 if failed or (result.unreachable and fail_on.value != "never") else 0


@app.command()
def facts(
    from_: FromOption = None, json_: JsonOption = False, redact: RedactOption = False
) -> None:
    """Print the gathered facts (attach them to bug reports with --json --redact)."""
    from checks.facts import gpus

    emit(Facts(gpus.enrich(_facts(from_))), json_, redact)


@app.command()
def rules(
    rule_id: Annotated[str | None, typer.Argument(help="Show one rule's docs and sources.")] = None,
    json_: JsonOption = False,
) -> None:
    """List the known-bad matrix rules, or show one rule."""
    from checks.matrix import registry

    if rule_id is None:
        emit(Rules(registry.rules()), json_)
        return
    found = registry.rule(rule_id)
    if found is None:
        raise _fail(f"no rule {rule_id!r}; `gpuprov rules` lists them")
    emit(Rules((found,), one=True), json_)


@app.command()
def explain(
    logs: Annotated[
        list[str] | None,
        typer.Argument(help="Log files to read ('-' reads stdin).", metavar="LOG..."),
    ] = None,
    journal: Annotated[
        str | None, typer.Option("--journal", help="Read `journalctl -u UNIT`.", metavar="UNIT")
    ] = None,
    docker: Annotated[
        str | None,
        typer.Option("--docker", help="Read `docker logs CONTAINER`.", metavar="CONTAINER"),
    ] = None,
    from_: FromOption = None,
    here: Annotated[
        bool,
        typer.Option(
            "--here", help="Combine with this host's facts (implied by --journal/--docker)."
        ),
    ] = False,
    json_: JsonOption = False,
    format_: FormatOption = None,
) -> None:
    """Read crash logs and say what went wrong, why, and how to fix it.

    Exit 0 when nothing known was found, 1 when a known error was diagnosed, 2 for unreadable input.
    """
    from checks.logs import logsource

    sources = logsource.plan(logs or [], journal, docker)
    if not sources:
        raise _fail("give a log file, '-' for stdin, --journal UNIT or --docker CONTAINER")
    host = _facts(from_) if from_ else None
    if host is None and (here or journal or docker):
        host = _facts(None)
    try:
        results = logsource.explain_all(sources, host)
    except logsource.LogError as exc:
        raise _fail(str(exc)) from None
    if format_ is not None:
        subjects = [Subject(r.source, "log", r.diagnoses) for r in results]
        ci_output.emit(format_, subjects, "gpuprov explain", None)
    else:
        emit(Explanation(results), json_)
    if any(result.diagnoses for result in results):
        raise typer.Exit(1)


InventoryArg = Annotated[
    str, typer.Argument(help="A pyinfra inventory file, e.g. inventories/home.py.")
]
LimitOption = Annotated[
    list[str] | None,
    typer.Option("--limit", help="Only these hosts or groups (globs allowed; repeatable)."),
]
ForceOption = Annotated[
    bool, typer.Option("--force", help="Change hosts even when the check finds errors.")
]
PruneOption = Annotated[
    int,
    typer.Option(
        "--prune-builds",
        min=0,
        metavar="N",
        help="Remove llama.cpp builds past the newest N (never the one in use; 0 keeps all).",
    ),
]


@app.command()
def plan(
    inventory: InventoryArg,
    limit: LimitOption = None,
    force: ForceOption = False,
    as_json: JsonOption = False,
    prune_builds: PruneOption = 0,
    format_: FormatOption = None,
) -> None:
    """Check every host, then show what apply would change there, with file diffs."""
    from provision import converge_cli

    code = converge_cli.converge(
        inventory,
        limit,
        apply=False,
        force=force,
        as_json=as_json,
        prune_builds=prune_builds,
        ci_format=format_,
    )
    raise typer.Exit(code)


@app.command()
def apply(
    inventory: InventoryArg,
    limit: LimitOption = None,
    yes: Annotated[
        bool, typer.Option("-y", "--yes", help="Do not ask before changing hosts.")
    ] = False,
    force: ForceOption = False,
    as_json: JsonOption = False,
    lock_timeout: Annotated[
        float, typer.Option("--lock-timeout", help="Seconds to wait for another apply to a host.")
    ] = 900,
    settle: Annotated[
        float,
        typer.Option(
            "--settle",
            min=0,
            help="Seconds every unit must stay up without a restart after the apply.",
        ),
    ] = 10,
    prune_builds: PruneOption = 0,
) -> None:
    """Check every host, converge it (build llama.cpp, install and supervise its servers), then
    prove it: every unit stays up and every server answers a completion."""
    from provision import converge_cli

    code = converge_cli.converge(
        inventory,
        limit,
        apply=True,
        yes=yes,
        force=force,
        as_json=as_json,
        lock_timeout=lock_timeout,
        settle=settle,
        prune_builds=prune_builds,
    )
    raise typer.Exit(code)


@app.command()
def status(
    inventory: InventoryArg,
    limit: LimitOption = None,
    as_json: JsonOption = False,
) -> None:
    """Every service gpuprov manages on each host: its state and since when, restarts, the
    canary's last check, the build or image it runs, the GPU memory it holds against the plan,
    and how it differs from the inventory. Exit 1 unless every service runs as planned."""
    from provision import converge_cli, deploy, status_cli

    converge_cli.pyinfra_logging(False)
    try:
        result = status_cli.run(inventory, limit)
    except deploy.InventoryError as exc:
        raise _fail(str(exc)) from None
    emit(result, as_json)
    raise typer.Exit(0 if result.healthy() else 1)


@app.command()
def logs(
    inventory: InventoryArg,
    service: Annotated[
        str,
        typer.Argument(
            help="A service of the inventory: a profile or replica name, 'balancer' or 'canary'."
        ),
    ],
    limit: LimitOption = None,
    since: Annotated[
        str | None,
        typer.Option("--since", help="As journalctl reads it: -1h, '2 hours ago', 2026-11-24."),
    ] = None,
    lines: Annotated[
        int, typer.Option("--lines", "-n", min=0, help="The last N lines (0: all).")
    ] = 200,
    explain_: Annotated[
        bool, typer.Option("--explain", help="Add what `gpuprov explain` finds in them.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """A managed service's journal from every host that runs it, secrets masked."""
    from provision import converge_cli, deploy, logs_cli

    converge_cli.pyinfra_logging(False)
    try:
        result = logs_cli.run(inventory, limit, service, since, lines, explain_)
    except (deploy.InventoryError, logs_cli.LogsError) as exc:
        raise _fail(str(exc)) from None
    emit(result, as_json)
    raise typer.Exit(1 if any(log.error for log in result.logs) else 0)


@app.command()
def uninstall(
    inventory: InventoryArg,
    limit: LimitOption = None,
    yes: Annotated[bool, typer.Option("-y", "--yes", help="Do not ask before removing.")] = False,
    as_json: JsonOption = False,
    lock_timeout: Annotated[
        float, typer.Option("--lock-timeout", help="Seconds to wait for an apply to a host.")
    ] = 900,
) -> None:
    """Remove what gpuprov installed on every host: its services' units and config, llama.cpp
    builds, the canary and the balancer's config, with the plan shown first. Models, the model
    cache, images, drivers, CUDA, the container toolkit and packages stay."""
    from provision import converge_cli

    raise typer.Exit(
        converge_cli.uninstall(
            inventory, limit, yes=yes, as_json=as_json, lock_timeout=lock_timeout
        )
    )


app.command(name="fit")(fit_cli.fit)
app.command(name="bench")(bench_cli.bench)


def _testhost_app() -> typer.Typer:
    from provision.testhost.cli import app as testhost_app

    return testhost_app


def expand_from(argv: list[str]) -> list[str]:
    """Let `--from a b c` mean `--from a --from b --from c` (click options take one value)."""
    out: list[str] = []
    collecting = False
    for arg in argv:
        if arg == "--from":
            collecting = True
            continue
        if collecting and (arg == "-" or not arg.startswith("-")):
            out += ["--from", arg]
            continue
        collecting = False
        out.append(arg)
    return out


def main() -> None:
    if sys.argv[1:2] == ["testhost"]:
        app.add_typer(_testhost_app(), name="testhost")
    else:  # listed in --help without importing it for every command
        app.add_typer(typer.Typer(help="Real systemd test hosts (podman, SSH)."), name="testhost")
    app(args=expand_from(sys.argv[1:]), prog_name="gpuprov")
