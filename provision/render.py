"""Rich text views of each command's result (`view`): facts, findings and diagnoses,
recommendations, rules. Data goes to stdout.

Text that came from input (facts, log lines, file names, and the messages that quote them) goes
through `_m` (markup) or `_v` (a value): never read as markup, control characters made visible,
one value cut at output.MAX_SHOWN characters."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from checks.facts.model import HostFacts
from checks.matrix.engine import Finding
from checks.matrix.host import gpus_looked_for
from checks.matrix.registry import Rule, area_title
from checks.reporting.fleet import FleetHost, FleetReport, SharedFinding
from checks.reporting.report import ImageVerdict, Report
from checks.reporting.status import LogsReport, StatusReport
from provision.output import Explanation, Facts, Rules, printable
from provision.redact import anonymised, redact

if TYPE_CHECKING:  # explain's modules load only for explain's own output
    from checks.logs.explain import Diagnosis
    from checks.logs.logsource import Result

STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _console() -> Console:
    return Console(highlight=False, soft_wrap=False)


def _m(text: str, lines: bool = False) -> str:
    """Text from input for a markup string: escaped, controls visible, cut when too long."""
    return escape(printable(text, lines=lines))


def _v(value: Any) -> Text:
    """A fact as text, never read as markup; None is a dimmed "unknown"."""
    if value is None:
        return Text("unknown", style="dim")
    if isinstance(value, bool):
        return Text("yes" if value else "no")
    if isinstance(value, list):
        return Text(printable(", ".join(str(v) for v in value)) if value else "none")
    return Text(printable(str(value)))


def _ran(facts: HostFacts, probe: str) -> bool:
    """Whether `probe` ran and answered here (a capture's unread outputs stay unknown)."""
    return any(p.name == probe and p.status == "ok" for p in facts.probes)


def _kv(title: str, rows: Iterable[tuple[str, Any]]) -> Table:
    table = Table(title=title, title_justify="left", show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold", min_width=22)
    table.add_column()
    for key, value in rows:
        table.add_row(Text(printable(key)), value if isinstance(value, Text) else _v(value))
    return table


def facts(f: HostFacts, redacted: bool = False) -> None:
    """The facts, grouped by area; unknown values say so. `redacted` masks what identifies the
    host (provision.redact)."""
    if redacted:
        f = redact(f)
    out = _console()
    out.print(f"[bold]Sources:[/bold] {_m(', '.join(f.sources)) or 'none'}")
    s, d, m = f.system, f.driver, f.modules
    nouveau = None if m.loaded is None else "nouveau" in m.loaded
    out.print(
        _kv(
            "System",
            [
                ("hostname", s.hostname),
                ("OS", s.os_pretty or (f"{s.os_id} {s.os_version}" if s.os_id else None)),
                ("kernel", s.kernel_release),
                ("architecture", s.machine),
                ("glibc", s.glibc),
                ("Secure Boot", s.secure_boot),
            ],
        )
    )
    out.print(
        _kv(
            "NVIDIA driver",
            [
                ("driver", d.version),
                ("driver CUDA", d.cuda_version),
                ("kernel module", d.kernel_module_version),
                ("module flavour", d.kernel_module_flavour or m.nvidia_license),
                ("NVML", d.nvml_error or d.nvml_library_version),
                ("nvidia-smi error", d.smi_error or ("none" if _ran(f, "nvidia-smi") else None)),
                ("persistence daemon", d.persistenced_running),
                ("nouveau loaded", nouveau),
            ],
        )
    )
    gpus = Table(title=f"GPUs ({len(f.gpus)})", title_justify="left")
    for col in ("#", "name", "CC", "VRAM MiB", "class", "arch", "bus id", "MIG"):
        gpus.add_column(col, overflow="fold")
    for g in f.gpus:
        gpus.add_row(
            _v(g.index),
            _v(g.name),
            _v(g.compute_capability),
            _v(g.memory_total_mib),
            _v(g.brand_class),
            _v(g.architecture),
            _v(g.pci_bus_id),
            _v(g.mig_mode),
        )
    out.print(gpus if f.gpus else f"[bold]GPUs:[/bold] {_no_gpus(f)}")
    toolkits = [
        (t.path or "nvcc", Text.assemble(_v(t.version), " (", _v(t.source), ")"))
        for t in f.toolkits
    ]
    out.print(_kv("CUDA toolkits", toolkits or [("nvcc", "none found")]))
    c = f.containers
    docker = c.docker
    out.print(
        _kv(
            "Containers",
            [
                ("docker client", docker.client_version if docker else None),
                (
                    "docker daemon",
                    (docker.server_error or docker.server_version) if docker else None,
                ),
                ("docker runtimes", docker.runtimes if docker else None),
                ("CDI devices", docker.cdi_devices if docker else None),
                ("podman", c.podman_version),
                ("container toolkit", c.toolkit_version),
                ("runtime hook", c.runtime_hook),
                ("CDI specs", c.cdi_specs),
            ],
        )
    )
    if f.compat:
        out.print(
            _kv(
                "CUDA compat libraries",
                [(x.path or x.package or "", x.driver_version) for x in f.compat],
            )
        )
    py = [(p.name or "", Text.assemble(_v(p.version), "  ", _v(p.location))) for p in f.python]
    out.print(_kv("Python ML packages", py or [("packages", "none found")]))
    builds = [
        (
            b.path or "llama.cpp",
            Text.assemble("version ", _v(b.version), ", CUDA archs ", _v(b.cuda_archs)),
        )
        for b in f.llamacpp
    ]
    out.print(_kv("llama.cpp builds", builds or [("builds", "none found")]))
    notes = [p for p in f.probes if p.status != "ok"]
    if notes:
        out.print(
            _kv(
                "Probes that found nothing",
                [(p.name, f"{p.status}: {p.detail or ''}") for p in notes],
            )
        )


def problems(items: Sequence[Finding | Diagnosis], notes: Sequence[str] = ()) -> Table:
    """One row per finding or diagnosis: rule, title, message, (a log's evidence and cause), fix,
    sources, and the item's note if `notes` has one. The text column wraps under itself."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for i, x in enumerate(items):
        style = STYLE[x.severity]
        lines = [f"[bold]{x.rule}[/bold] {_m(x.title)}", _m(x.message, lines=True)]
        if not isinstance(x, Finding):  # a Diagnosis: a log's evidence and cause
            evidence = [f"  line {n}: {_m(text)}" for n, text in x.evidence]
            if x.count > len(x.evidence):
                evidence.append(f"  ... and {x.count - len(x.evidence)} more")
            shown = "\n".join(evidence)
            lines += [f"[dim]{shown}[/dim]", f"[bold]Why:[/bold] {_m(x.cause, lines=True)}"]
        lines += [
            f"[green]Fix:[/green] {_m(x.fix, lines=True)}",
            f"[dim]Sources: {_m(' '.join(x.citations))}[/dim]",
        ]
        if i < len(notes) and notes[i]:
            lines.append(f"[bold]{_m(notes[i], lines=True)}[/bold]")
        grid.add_row(f"  [{style}]{x.severity.upper():7}[/{style}]", "\n".join(lines) + "\n")
    return grid


def print_problems(items: Sequence[Finding | Diagnosis], notes: Sequence[str] = ()) -> None:
    _console().print(problems(items, notes))


def report(r: Report, redacted: bool = False) -> None:
    """The full check report: facts, findings by area, recommendations, a summary line."""
    if redacted:
        r = redact(r)
    facts(r.facts)
    out = _console()
    out.print()
    out.rule("Findings")
    if not r.findings:
        out.print("  No known problem found.")
    for area in sorted({f.area for f in r.findings}):
        out.print(f"[bold]{escape(area_title(area))}[/bold]")
        out.print(problems([x for x in r.findings if x.area == area]))
    if r.images:
        out.rule("Images")
        out.print(image_verdicts(r.images))
    out.rule("Recommendations")
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True, style="bold")
    grid.add_column(overflow="fold")
    for rec in r.recommendations:
        grid.add_row(
            f"  {_m(rec.topic)}",
            f"[green]{_m(rec.value)}[/green]\n{_m(rec.detail, lines=True)}"
            f"\n[dim]based on {_m(', '.join(rec.basis))}[/dim]",
        )
    out.print(grid)
    counts = {s: sum(1 for f in r.findings if f.severity == s) for s in STYLE}
    out.print(
        f"\n{counts['error']} error(s), {counts['warning']} warning(s), {counts['info']} info."
    )


_OUTCOME_STYLE = {"no known problem": "green", "unknown": "yellow"}


def _requirement(text: str | None) -> str:
    """The CUDA floor of a requirement, and how many alternatives follow it."""
    if not text:
        return "none"
    first, *rest = text.split()
    return f"{first} (+{len(rest)} brand/driver alternatives)" if rest else first


def image_verdicts(verdicts: Iterable[ImageVerdict]) -> Table:
    """One line per image: what starting it here does, and the values that decide it."""
    table = Table(box=None, padding=(0, 1))
    for column in ("image", "outcome", "CUDA", "requirement (toolkit)", "compat libcuda", "read"):
        table.add_column(column, overflow="fold")
    for v in verdicts:
        style = _OUTCOME_STYLE.get(v.outcome, "red")
        outcome = f"[{style}]{escape(v.outcome)}[/{style}]"
        if v.rules:
            outcome += f" ({escape(', '.join(v.rules))})"
        table.add_row(
            _m(v.ref or "?"),
            outcome,
            _v(v.cuda_version),
            _v(_requirement(v.requirement)),
            _v(v.compat_driver or "not loaded"),
            _v(v.source),
        )
    return table


def rule_list(rules: Iterable[Rule]) -> None:
    table = Table(show_header=True, box=None)
    for col in ("id", "severity", "area", "title"):
        table.add_column(col)
    for r in rules:
        table.add_row(r.id, f"[{STYLE[r.severity]}]{r.severity}[/]", r.area, escape(r.title))
    _console().print(table)


def rule_docs(r: Rule) -> None:
    from rich.markdown import Markdown

    _console().print(Markdown(r.docs()))


def rule_json(r: Rule) -> dict[str, Any]:
    return {
        "id": r.id,
        "title": r.title,
        "severity": r.severity,
        "area": r.area,
        "why": r.why.strip(),
        "symptoms": list(r.symptoms),
        "fix": r.fix,
        "citations": list(r.citations),
        "detected_by": list(r.detected_by),
        "fixed_by": r.fixed_by,
    }


def explanations(results: list[Result]) -> None:
    """Per log: each diagnosis with its evidence, cause, fix and sources, most specific first."""
    out = _console()
    for result in results:
        size = f" ({result.lines} lines)" if result.lines is not None else ""
        out.rule(f"{_m(result.source)}{size}")
        if not result.diagnoses:
            out.print("  No known failure found.")
            continue
        out.print(problems(result.diagnoses))


@functools.singledispatch
def view(model: object, redacted: bool = False) -> None:
    """Print a command's result as text; each kind of result registers its view here."""
    raise TypeError(f"no text view for {type(model).__name__}")


view.register(Report, report)


def fleet(r: FleetReport, redacted: bool = False) -> None:
    """An inventory's check: per host its key facts, findings and advice; then which hosts
    share which finding, and the hosts that could not be checked."""
    if redacted:
        r = anonymised(r)
    out = _console()
    for host in r.hosts:
        out.rule(f"[bold]{_m(host.name)}[/bold]")
        if host.error is not None:
            out.print(f"  [bold red]not checked[/bold red]: {_m(host.error)}")
            continue
        _fleet_host(out, host)
    out.rule("Fleet")
    if r.shared:
        out.print(shared_findings(r.shared, len(r.hosts) - len(r.unreachable)))
    else:
        out.print("  No known problem found on any host that answered.")
    for host in r.unreachable:
        out.print(f"  [bold red]unreachable[/bold red] {_m(host.name)}: {_m(host.error or '')}")
    counts = {s: sum(1 for f in r.findings() if f.severity == s) for s in STYLE}
    flagged = sum(1 for h in r.hosts if h.findings)
    out.print(
        f"\n{len(r.hosts) - len(r.unreachable)} of {len(r.hosts)} host(s) checked; "
        f"{counts['error']} error(s), {counts['warning']} warning(s), {counts['info']} info "
        f"on {flagged} host(s)."
    )


def _no_gpus(facts: HostFacts) -> str:
    """'none found' where NVML or nvidia-smi looked; 'none named' where only captures were read."""
    return "none found" if gpus_looked_for(facts) else "none named in what was read"


def _fleet_host(out: Console, host: FleetHost) -> None:
    f = host.facts
    assert f is not None
    gpus = ", ".join(f"{g.name or 'unknown GPU'} ({g.compute_capability or '?'})" for g in f.gpus)
    driver = f.driver.version or f.driver.kernel_module_version
    nvcc = ", ".join(t.version or "?" for t in f.toolkits) or "none"
    out.print(
        f"  GPUs: {_m(gpus or _no_gpus(f))}  driver: {_m(driver or 'unknown')} "
        f"(CUDA {_m(f.driver.cuda_version or 'unknown')})  nvcc: {_m(nvcc)}"
    )
    if host.findings:
        out.print(problems(host.findings))
    else:
        out.print("  No known problem found.")
    if host.images:
        out.print(image_verdicts(host.images))
    for rec in host.recommendations:
        out.print(f"  [dim]{_m(rec.topic)}:[/dim] [green]{_m(rec.value)}[/green]")


def shared_findings(shared: Iterable[SharedFinding], checked: int) -> Table:
    """One row per rule: how many of the checked hosts it fired on, and which."""
    table = Table(box=None, padding=(0, 1))
    for column in ("severity", "rule", "title", "hosts"):
        table.add_column(column, overflow="fold")
    for s in shared:
        style = STYLE[s.severity]
        table.add_row(
            f"[{style}]{s.severity}[/{style}]",
            s.rule,
            _m(s.title),
            f"{len(s.hosts)}/{checked}: {_m(', '.join(s.hosts))}",
        )
    return table


def status_view(r: StatusReport, redacted: bool = False) -> None:
    """Per host: one row per managed service, then stale units and the builds."""
    out = _console()
    for host in r.hosts:
        out.rule(f"[bold]{_m(host.name)}[/bold]")
        if host.error is not None:
            out.print(f"  [bold red]not read[/bold red]: {_m(host.error)}")
            continue
        table = Table(box=None, padding=(0, 1))
        for column in ("service", "state", "since", "restarts (1h)", "canary", "runs", "VRAM"):
            table.add_column(column, overflow="fold")
        for s in host.services:
            style = "green" if s.state.startswith("active") else "bold red"
            restarts = f"{_count(s.restarts)} ({_count(s.restarts_last_hour)})"
            table.add_row(
                _m(s.service),
                f"[{style}]{_m(s.state)}[/{style}]",
                _v(s.since),
                restarts,
                _v(s.canary),
                _v(s.runs),
                _vram(s.vram_used_mib, s.vram_planned_mib),
            )
        out.print(table)
        for s in host.services:
            for d in s.drift:
                out.print(f"  [yellow]drift[/yellow] {_m(s.service)}: {_m(d)}")
        for unit in host.stale:
            out.print(
                f"  [yellow]stale[/yellow] {_m(unit)}: not in the inventory; apply removes it"
            )
        planned = f" (planned: {host.build_planned})" if host.build_planned else ""
        out.print(
            f"  llama.cpp: current {_m(host.build_current or 'none')}{_m(planned)}; "
            f"{len(host.builds)} build(s) kept"
        )


def _count(value: int | None) -> str:
    return "?" if value is None else str(value)


def _vram(used: int | None, planned: float | None) -> Text:
    if used is None and planned is None:
        return Text("-", style="dim")
    text = f"{_count(used)} MiB" + (f" of {planned:.0f} planned" if planned is not None else "")
    over = used is not None and planned is not None and used > planned * 1.05
    return Text(text, style="yellow" if over else "")


view.register(StatusReport, status_view)


def logs_view(r: LogsReport, redacted: bool = False) -> None:
    """Per host: the journal lines, then the diagnoses when --explain asked for them."""
    out = _console()
    for log in r.logs:
        out.rule(f"[bold]{_m(log.host)}[/bold] {_m(log.unit)}")
        if log.error is not None:
            out.print(f"  [bold red]not read[/bold red]: {_m(log.error)}")
            continue
        for line in log.lines:
            out.print(Text(printable(line)))
        if log.diagnoses is not None:
            out.rule("explain", style="dim")
            if log.diagnoses:
                out.print(problems(log.diagnoses))
            else:
                out.print("  No known failure found.")


view.register(LogsReport, logs_view)


@view.register
def _fleet_view(model: FleetReport, redacted: bool = False) -> None:
    fleet(model, redacted)


@view.register
def _facts_view(model: Facts, redacted: bool = False) -> None:
    facts(model.host, redacted)


@view.register
def _rules_view(model: Rules, redacted: bool = False) -> None:
    if model.one:
        rule_docs(model.rules[0])
    else:
        rule_list(model.rules)


@view.register
def _explanation_view(model: Explanation, redacted: bool = False) -> None:
    explanations(model.results)
