"""`gpuprov testhost`: make, list and remove systemd test hosts reached over SSH."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable
from typing import Annotated, TypeVar

import typer

from provision.testhost import hosts
from provision.testhost.image import ensure_image
from provision.testhost.machine import TestHostError

app = typer.Typer(
    help="Systemd test hosts in podman containers, each in its own network namespace "
    "(10.213.N.2), reached over SSH as root. Needs root, podman, runc and debootstrap.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]
T = TypeVar("T")


def _guard(action: Callable[[], T]) -> T:
    try:
        return action()
    except TestHostError as exc:
        print(f"gpuprov: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None


@app.command()
def image(
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Build it even if it exists.")] = False,
) -> None:
    """Build the golden image (debootstrap, 1-3 min) unless it exists; print its name."""
    print(_guard(lambda: ensure_image(rebuild=rebuild)))


@app.command()
def up(
    name: Annotated[str, typer.Argument(help="Host name: lowercase letters, digits, dashes.")],
    index: Annotated[
        int | None, typer.Option("--index", help="Slot 1-200: the host gets 10.213.N.2.")
    ] = None,
    volume: Annotated[
        list[str] | None,
        typer.Option("--volume", "-v", help="Mount SRC:DST into the host (repeatable)."),
    ] = None,
    json_: JsonOption = False,
) -> None:
    """Start a test host (building the image first if needed) and wait until it has booted."""
    host = _guard(lambda: hosts.up(name, index=index, volumes=volume or []))
    if json_:
        print(json.dumps(host.to_json(), indent=2))
    else:
        print(shlex.join(hosts.ssh_command(host)))


@app.command()
def down(name: Annotated[str, typer.Argument(help="Host name.")]) -> None:
    """Stop and remove a test host; nothing to do is not an error."""
    _guard(lambda: hosts.down(name))


@app.command("list")
def list_(json_: JsonOption = False) -> None:
    """List test hosts with a record in the state dir."""
    found = hosts.list_hosts()
    if json_:
        print(json.dumps([h.to_json() for h in found], indent=2))
        return
    for host in found:
        print(f"{host.name}\t{host.address}\t{host.container}")
