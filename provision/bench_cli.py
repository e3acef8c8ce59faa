"""`gpuprov bench`: what a deployed service does under concurrent load.

The service is named in an inventory (a llama-server profile, a vLLM replica, or `balancer` for
the host's nginx in front of them) and reached where provision puts it: the profile's or
replica's `host` and `port`, the balancer's `nginx_lb_bind` and `nginx_lb_listen`; a service
listening on loopback of a remote host is reached through `ssh -L` with the host's SSH data. Or
a URL is given. The load and the statistics are provision/bench.py's. Exit 0 measured, 1 when
every request of some level failed, 2 for bad input, an unreachable URL or an unknown service.
"""

from __future__ import annotations

import contextlib
import html
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from provision import bench as load_test
from provision.output import emit, printable

if TYPE_CHECKING:
    from provision.stack import Stack

BALANCER = "balancer"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
WILDCARDS = ("0.0.0.0", "::", "")
TUNNEL_WAIT = 15.0  # seconds ssh may take to open the forward


@dataclass(frozen=True)
class Service:
    """A service of an inventory host, where it listens, and what to ask it for."""

    host: str  # the inventory's host name
    name: str
    kind: str  # llama, vllm, balancer
    bind: str
    port: int
    model: str
    api_key_env: str = ""


def services(host: str, stack: Stack) -> list[Service]:
    """Every service a host's stack runs, as provision declares it."""
    found = [
        Service(host, p.name, "llama", p.host, p.port, p.alias, p.api_key_env)
        for p in stack.profiles
    ]
    found += [
        Service(host, r.name, "vllm", r.host, r.port, r.served, r.api_key_env)
        for r in stack.vllm.replicas
    ]
    if stack.balancer.enabled:
        behind = found[-1] if stack.vllm.replicas else (found[0] if found else None)
        b = stack.balancer
        model = behind.model if behind else ""
        key = behind.api_key_env if behind else ""
        found.append(Service(host, BALANCER, "balancer", b.bind, b.listen, model, key))
    return found


def pick(path: str, wanted: str, found: Sequence[Service]) -> Service:
    """The one service named `wanted`; BenchError naming the ones there are, or the hosts."""
    matches = [s for s in found if s.name == wanted]
    if not matches:
        names = ", ".join(sorted({f"{s.name} ({s.host})" for s in found})) or "none"
        raise load_test.BenchError(f"{path}: no service {wanted!r}; the inventory has: {names}")
    if len(matches) > 1:
        hosts = ", ".join(s.host for s in matches)
        raise load_test.BenchError(
            f"{path}: {wanted!r} runs on {hosts}; pick one host with --limit"
        )
    return matches[0]


def resolve(path: str, wanted: str, limit: list[str] | None) -> tuple[Service, dict[str, Any]]:
    """The service and its host's data, from the inventory validated as provision does."""
    from provision import deploy

    try:
        _, _, hosts = deploy.load_inventory(path, limit)
        stacks = deploy.validate(path, hosts)
    except deploy.InventoryError as exc:
        raise load_test.BenchError(str(exc)) from None
    data: dict[str, dict[str, Any]] = {}
    for h in hosts:
        data[h.name] = h.data.dict()  # type: ignore[no-untyped-call]  # pyinfra's HostData
    found = [s for h in hosts for s in services(h.name, stacks[h.name][0])]
    service = pick(path, wanted, found)
    return service, data[service.host]


def reach(service: Service) -> str:
    """The address to connect to from this machine when no tunnel is needed."""
    bind = service.bind
    if service.host.startswith("@local"):
        return "127.0.0.1" if bind in WILDCARDS else bind
    return service.host if bind in WILDCARDS else bind


def needs_tunnel(service: Service) -> bool:
    return not service.host.startswith("@local") and service.bind in LOOPBACK


def ssh_command(service: Service, data: dict[str, Any], local_port: int) -> list[str]:
    """`ssh -N -L` forwarding 127.0.0.1:local_port here to the service on its host, with the
    host's pyinfra SSH data (ssh_hostname, ssh_user, ssh_port, ssh_key, known hosts)."""
    if service.host.startswith("@"):
        raise load_test.BenchError(
            f"{service.host}: bench reaches a host over SSH; for this connector use --url"
        )
    bind = f"[{service.bind}]" if ":" in service.bind else service.bind
    argv = ["ssh", "-N", "-o", "ExitOnForwardFailure=yes", "-o", "BatchMode=yes"]
    argv += ["-L", f"127.0.0.1:{local_port}:{bind}:{service.port}"]
    if data.get("ssh_port"):
        argv += ["-p", str(data["ssh_port"])]
    if data.get("ssh_key"):
        argv += ["-i", str(data["ssh_key"]), "-o", "IdentitiesOnly=yes"]
    if data.get("ssh_known_hosts_file"):
        argv += ["-o", f"UserKnownHostsFile={data['ssh_known_hosts_file']}"]
    strict = data.get("ssh_strict_host_key_checking")
    if strict:
        argv += ["-o", f"StrictHostKeyChecking={strict}"]
    host = str(data.get("ssh_hostname") or service.host)
    user = data.get("ssh_user")
    return [*argv, f"{user}@{host}" if user else host]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def tunnel(service: Service, data: dict[str, Any]) -> Iterator[tuple[str, int, str]]:
    """(address, port, how) to reach the service: directly, or through an ssh forward that
    lives as long as the context."""
    if not needs_tunnel(service):
        yield reach(service), service.port, ""
        return
    if shutil.which("ssh") is None:
        raise load_test.BenchError(
            f"{service.name} listens on {service.bind} of {service.host}; reaching it needs ssh"
        )
    port = _free_port()
    argv = ssh_command(service, data, port)
    how = f"ssh -L {port}:{service.bind}:{service.port} {argv[-1]}"
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        _wait_for(proc, port, how)
        yield "127.0.0.1", port, how
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr:
            proc.stderr.close()


def _wait_for(proc: subprocess.Popen[bytes], port: int, how: str) -> None:
    deadline = time.monotonic() + TUNNEL_WAIT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            error = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
            raise load_test.BenchError(f"{how}: ssh exited {proc.returncode}: {error.strip()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.2)
    raise load_test.BenchError(f"{how}: the forward did not open within {TUNNEL_WAIT:.0f} s")


def concurrency_levels(text: str) -> tuple[int, ...]:
    """`1,2,4,8` as distinct positive numbers in the order given; BenchError otherwise."""
    out: list[int] = []
    for word in text.split(","):
        word = word.strip()
        if not (word.isascii() and word.isdigit()) or not 0 < int(word) <= 4096:
            raise load_test.BenchError(f"--concurrency {text!r}: numbers 1-4096 like 1,2,4,8")
        if int(word) not in out:
            out.append(int(word))
    return tuple(out)


def bar(value: float, top: float, width: int = 24) -> str:
    """A bar of `value` against `top`, in eighths of a character."""
    if top <= 0 or value <= 0:
        return ""
    eighths = round(value / top * width * 8)
    return "█" * (eighths // 8) + ("", "▏", "▎", "▍", "▌", "▋", "▊", "▉")[eighths % 8]


def show(result: load_test.Bench) -> None:
    """The terminal view: one row per level, a bar of its aggregate tok/s, the verdict."""
    from rich.console import Console
    from rich.table import Table

    t = result.target
    where = f"{t.service} on {t.host} ({t.url})" if t.service else t.url
    out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 100)
    out.print(
        f"bench     {printable(where)}" + (f", model {printable(t.model)}" if t.model else "")
    )
    if t.reached_through:
        out.print(f"through   {printable(t.reached_through)}")
    size = (
        f"{result.duration_seconds:g} s per level"
        if result.duration_seconds is not None
        else f"{result.requests_per_level} requests per level"
        if result.requests_per_level is not None
        else f"{load_test.REQUESTS_PER_STREAM} requests per stream"
    )
    out.print(
        f"load      ~{result.prompt_tokens} prompt tokens, {result.output_tokens} output tokens, "
        f"streamed; {size}"
    )
    table = Table(box=None, padding=(0, 1))
    for column in ("users", "ok", "TTFT p50", "TTFT p90", "ITL p50", "stream", "latency p90"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("aggregate tok/s", no_wrap=True)
    top = max((level.aggregate_tok_s for level in result.levels), default=0.0)
    for level in result.levels:
        table.add_row(
            str(level.concurrency),
            f"{level.succeeded}/{level.requests}",
            _ms(level.ttft_ms.p50),
            _ms(level.ttft_ms.p90) + ("" if level.meets_goal else " ✗"),
            _ms(level.itl_ms.p50),
            _num(level.stream_tok_s.p50),
            _ms(level.latency_ms.p90),
            f"{bar(level.aggregate_tok_s, top, 10):<11}{level.aggregate_tok_s:7.1f}"
            + (" knee" if level.knee else ""),
        )
    out.print(table)
    for level in result.levels:
        for error in level.errors:
            out.print(f"  errors at {level.concurrency}: {printable(error)}", markup=False)
    sources = sorted({level.tokens_from for level in result.levels} - {"none"})
    counted = {"usage": "the server's usage", "chunks": "streamed chunks counted"}
    out.print(
        "tokens    from "
        + (", ".join(counted.get(s, s) for s in sources) or "nothing measured")
        + "; stream: a stream's tok/s; ✗: over the TTFT goal or requests failed"
    )
    goal = load_test.duration(result.ttft_goal_ms)
    out.print(f"verdict   {printable(result.verdict)} (goal: TTFT p90 ≤ {goal})", markup=False)


def _ms(value: float | None) -> str:
    return "-" if value is None else load_test.duration(value)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def html_report(result: load_test.Bench) -> str:
    """A self-contained page: aggregate tok/s bars and the TTFT p90 line per level (inline SVG,
    no script), the goal as a dashed line, the verdict."""
    levels = result.levels
    width, height, left, bottom = 640, 300, 56, 40
    plot_w, plot_h = width - left - 56, height - bottom - 24
    n = max(len(levels), 1)
    slot = plot_w / n
    top_tps = max((lv.aggregate_tok_s for lv in levels), default=0.0) or 1.0
    ttfts = [lv.ttft_ms.p90 for lv in levels if lv.ttft_ms.p90 is not None]
    top_ttft = max([*ttfts, result.ttft_goal_ms]) or 1.0
    parts = []
    points = []
    for i, lv in enumerate(levels):
        x = left + i * slot
        h = lv.aggregate_tok_s / top_tps * plot_h
        y = 24 + plot_h - h
        fill = "#d9534f" if lv.succeeded == 0 else "#4a7fb5" if not lv.knee else "#e08a1e"
        parts.append(
            f'<rect x="{x + slot * 0.2:.1f}" y="{y:.1f}" width="{slot * 0.6:.1f}" '
            f'height="{h:.1f}" fill="{fill}"><title>{lv.concurrency} users: '
            f"{lv.aggregate_tok_s:.1f} tok/s</title></rect>"
        )
        parts.append(
            f'<text x="{x + slot / 2:.1f}" y="{y - 4:.1f}" text-anchor="middle" '
            f'font-size="11">{lv.aggregate_tok_s:.0f}</text>'
        )
        parts.append(
            f'<text x="{x + slot / 2:.1f}" y="{height - bottom + 16}" text-anchor="middle" '
            f'font-size="12">{lv.concurrency}{" (knee)" if lv.knee else ""}</text>'
        )
        if lv.ttft_ms.p90 is not None:
            py = 24 + plot_h - lv.ttft_ms.p90 / top_ttft * plot_h
            points.append(f"{x + slot / 2:.1f},{py:.1f}")
    goal_y = 24 + plot_h - result.ttft_goal_ms / top_ttft * plot_h
    parts.append(
        f'<line x1="{left}" x2="{left + plot_w}" y1="{goal_y:.1f}" y2="{goal_y:.1f}" '
        'stroke="#c0392b" stroke-dasharray="4 3"/>'
    )
    if points:
        parts.append(
            f'<polyline points="{" ".join(points)}" fill="none" stroke="#c0392b" stroke-width="2"/>'
        )
    axes = (
        f'<line x1="{left}" x2="{left}" y1="24" y2="{24 + plot_h}" stroke="#333"/>'
        f'<line x1="{left}" x2="{left + plot_w}" y1="{24 + plot_h}" y2="{24 + plot_h}" '
        'stroke="#333"/>'
        f'<text x="{left - 6}" y="30" text-anchor="end" font-size="11">{top_tps:.0f}</text>'
        f'<text x="{left - 6}" y="{24 + plot_h}" text-anchor="end" font-size="11">0</text>'
        f'<text x="{left + plot_w + 4}" y="30" font-size="11">'
        f"{load_test.duration(top_ttft)}</text>"
        f'<text x="{left + plot_w / 2}" y="{height - 6}" text-anchor="middle" font-size="12">'
        "concurrent users</text>"
    )
    t = result.target
    title = html.escape(
        f"gpuprov bench: {t.service or t.url}" + (f" ({t.model})" if t.model else "")
    )
    rows = "".join(
        f"<tr><td>{lv.concurrency}</td><td>{lv.succeeded}/{lv.requests}</td>"
        f"<td>{_ms(lv.ttft_ms.p50)}</td><td>{_ms(lv.ttft_ms.p90)}</td>"
        f"<td>{_ms(lv.itl_ms.p50)}</td><td>{lv.aggregate_tok_s:.1f}</td></tr>"
        for lv in levels
    )
    return (
        '<!doctype html>\n<html><head><meta charset="utf-8">'
        f"<title>{title}</title><style>body{{font-family:sans-serif;max-width:700px}}"
        "td,th{padding:2px 10px;text-align:right}</style></head><body>\n"
        f"<h1>{title}</h1>\n"
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="aggregate tok/s and TTFT p90 per level">{axes}'
        f"{''.join(parts)}</svg>\n"
        "<p>Bars: aggregate output tok/s (orange: the knee, red: every request failed). "
        "Line: TTFT p90; dashed: the goal.</p>\n"
        "<table><tr><th>users</th><th>ok</th><th>TTFT p50</th><th>TTFT p90</th>"
        f"<th>ITL p50</th><th>tok/s</th></tr>{rows}</table>\n"
        f"<p>{html.escape(result.verdict)}</p>\n</body></html>\n"
    )


def _fail(message: str) -> typer.Exit:
    print(f"gpuprov: {printable(message)}", file=sys.stderr)
    return typer.Exit(2)


def _progress(message: str) -> None:
    print(f"gpuprov: bench: {printable(message)}", file=sys.stderr, flush=True)


def measure(
    target: load_test.Target, url: str, api_key: str, load: load_test.Load, timeout: float
) -> load_test.Bench:
    """Resolve the model when none is named (GET /models), then sweep."""
    where = load_test.endpoint(url, api_key, timeout)
    if target.model is None:
        listed = load_test.models(where)
        target = replace(target, model=listed[0] if listed else None)
    return load_test.sweep(target, where, load, _progress)


def bench(
    inventory: Annotated[
        str | None,
        typer.Argument(help="A pyinfra inventory (or give --url).", show_default=False),
    ] = None,
    service: Annotated[
        str | None,
        typer.Argument(
            help="A llama-server profile or vLLM replica by name, or 'balancer'.",
            show_default=False,
        ),
    ] = None,
    url: Annotated[
        str | None,
        typer.Option("--url", help="An OpenAI base URL instead: http://HOST:PORT/v1."),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model", help="The model to ask for (default: the service's, or the server's first)."
        ),
    ] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option("--api-key-env", help="With --url: the variable holding the API key."),
    ] = None,
    limit: Annotated[
        list[str] | None,
        typer.Option("--limit", help="With an inventory: only these hosts (globs)."),
    ] = None,
    concurrency: Annotated[
        str, typer.Option("--concurrency", help="Concurrent streams per level.")
    ] = "1,2,4,8",
    requests_per_level: Annotated[
        int | None,
        typer.Option(
            "--requests-per-level", min=1, help="Requests per level (default: 4 per stream)."
        ),
    ] = None,
    duration: Annotated[
        float | None,
        typer.Option("--duration", min=1, help="Seconds per level instead of a request count."),
    ] = None,
    prompt_tokens: Annotated[
        int, typer.Option("--prompt-tokens", min=1, help="Prompt length in tokens (about).")
    ] = load_test.PROMPT_TOKENS,
    output_tokens: Annotated[
        int, typer.Option("--output-tokens", min=1, help="Output tokens per request.")
    ] = load_test.OUTPUT_TOKENS,
    ttft_goal: Annotated[
        float, typer.Option("--ttft-goal", min=1, help="TTFT p90 goal in milliseconds.")
    ] = load_test.TTFT_GOAL_MS,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1, help="Seconds a stream may stay silent.")
    ] = 120.0,
    html_file: Annotated[
        str | None,
        typer.Option("--html", help="Also write a self-contained HTML chart here.", metavar="FILE"),
    ] = None,
    json_: Annotated[bool, typer.Option("--json", help="Print JSON (versioned schema).")] = False,
) -> None:
    """Measure a deployed service under concurrent streamed chat completions: TTFT, inter-token
    latency and throughput per concurrency level, the knee, and a verdict against a TTFT goal.

    Exit 0 when measured, 1 when every request of some level failed, 2 for bad input, an
    unreachable service or an unknown one.
    """
    try:
        levels = concurrency_levels(concurrency)
        if requests_per_level is not None and duration is not None:
            raise load_test.BenchError("give --requests-per-level or --duration, not both")
        load = load_test.Load(
            levels, prompt_tokens, output_tokens, requests_per_level, duration, ttft_goal
        )
        result = _run(inventory, service, url, model, api_key_env, limit, load, timeout)
    except load_test.BenchError as exc:
        raise _fail(str(exc)) from None
    if html_file:
        try:
            Path(html_file).write_text(html_report(result), encoding="utf-8")
        except OSError as exc:
            raise _fail(f"--html {html_file}: {exc.strerror or exc}") from None
    if json_:
        emit(result, as_json=True)
    else:
        show(result)
    if result.broken:
        raise typer.Exit(1)


def _run(
    inventory: str | None,
    wanted: str | None,
    url: str | None,
    model: str | None,
    api_key_env: str | None,
    limit: list[str] | None,
    load: load_test.Load,
    timeout: float,
) -> load_test.Bench:
    if url is not None:
        if inventory is not None or wanted is not None:
            raise load_test.BenchError("give INVENTORY SERVICE or --url, not both")
        key = os.environ.get(api_key_env, "") if api_key_env else ""
        if api_key_env and not key:
            raise load_test.BenchError(f"--api-key-env {api_key_env}: not set here")
        return measure(load_test.Target(url, model), url, key, load, timeout)
    if inventory is None or wanted is None:
        raise load_test.BenchError("give INVENTORY SERVICE, or --url http://HOST:PORT/v1")
    found, data = resolve(inventory, wanted, limit)
    key = os.environ.get(found.api_key_env, "") if found.api_key_env else ""
    if found.api_key_env and not key:
        raise load_test.BenchError(
            f"{found.name} needs its API key: {found.api_key_env} is not set here"
        )
    with tunnel(found, data) as (address, port, how):
        host = f"[{address}]" if ":" in address else address
        base = f"http://{host}:{port}/v1"
        target = load_test.Target(
            base, model or found.model or None, found.name, found.host, how or None
        )
        _progress(f"{found.name} on {found.host}: {base}" + (f" ({how})" if how else ""))
        try:
            return measure(target, base, key, load, timeout)
        except load_test.BenchError as exc:
            if not how:
                raise
            raise load_test.BenchError(
                f"{exc} (through {how}: does {found.name} run on {found.host}?)"
            ) from None
