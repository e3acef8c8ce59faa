"""The canary's metrics: the textfile it writes for node_exporter's textfile collector.

Real: the canary script's main() against the stand-ins of tests/test_canary.py (a local HTTP
server, systemctl and journalctl answering with systemd 252's recorded output), nvidia-smi's
values as recorded on real machines (tests/fixtures/corpus/captures/, provenance in its
MANIFEST.tsv), and the nvidia-smi stand-in of the end-to-end tests (tests/support/
standin_nvidia_smi.py) answering from a recorded GPU description. The textfile is read back with
a strict parser of Prometheus' text format written here (prometheus_client is not a test
dependency); the end-to-end test (tests/e2e/test_metrics.py) has the real node_exporter read it.
"""

# ruff: noqa: F811 (the fixtures `canary` and `stub` come from tests/test_canary.py)
from __future__ import annotations

import math
import re
import stat
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from provision import stack
from provision.settings.read import StackError
from tests.conftest import FIXTURES
from tests.support.hostile import hostile_lines, hostile_text
from tests.test_canary import SYSTEMD, UNIT, Host, Stub, canary, stub  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = FIXTURES / "corpus" / "captures"
GPUS_580 = FIXTURES / "standin" / "gpus" / "dual_rtx3090_580.json"
STANDIN_SMI = ROOT / "tests" / "support" / "standin_nvidia_smi.py"
LABELS = {"unit": UNIT, "service": "main", "kind": "llama"}
NAME_3090 = "NVIDIA GeForce RTX 3090"
UUIDS_3090 = (
    "GPU-00000000-0000-0000-0000-000000003090",
    "GPU-00000000-0000-0000-0000-000000003091",
)

# --- a strict reader of the text format -----------------------------------------------------------

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")

Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _labels(text: str) -> tuple[dict[str, str], str]:
    """`{a="x",b="y"} rest` -> ({a: x, b: y}, rest); escapes \\\\, \\" and \\n only."""
    labels: dict[str, str] = {}
    i = 1
    while text[i] != "}":
        match = LABEL_NAME.match(text, i)
        assert match, f"label name at {text[i:]!r}"
        name, i = match.group(0), match.end()
        assert text[i : i + 2] == '="', text[i:]
        i += 2
        value = []
        while text[i] != '"':
            if text[i] == "\\":
                escaped = {"\\": "\\", '"': '"', "n": "\n"}.get(text[i + 1])
                assert escaped is not None, f"bad escape {text[i : i + 2]!r}"
                value.append(escaped)
                i += 2
            else:
                assert text[i] != "\n"
                value.append(text[i])
                i += 1
        i += 1
        assert name not in labels, f"label {name} twice"
        labels[name] = "".join(value)
        if text[i] == ",":
            i += 1
    return labels, text[i + 1 :]


def parse_exposition(text: str) -> tuple[Series, dict[str, str]]:
    """(series -> value, family -> type); fails on anything the format does not allow: a sample
    without HELP and TYPE before it, a family split in two, a series twice, a bad value."""
    assert text.endswith("\n")
    series: Series = {}
    types: dict[str, str] = {}
    helped: set[str] = set()
    done: set[str] = set()
    current = ""
    for line in text[:-1].split("\n"):
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            word, name, rest = line[2:6], *line[7:].split(" ", 1)
            assert NAME.fullmatch(name) and rest
            assert name not in done, f"{name} split"
            if current and current != name:
                done.add(current)
            current = name
            if word == "HELP":
                helped.add(name)
            else:
                assert rest in TYPES and name not in types
                types[name] = rest
            continue
        match = NAME.match(line)
        assert match, line
        name, rest = match.group(0), line[match.end() :]
        assert name == current and name in helped and name in types, line
        labels: dict[str, str] = {}
        if rest.startswith("{"):
            labels, rest = _labels(rest)
        assert rest.startswith(" ") and " " not in rest[1:], line  # no timestamps
        value = float(rest[1:])
        key = (name, tuple(sorted(labels.items())))
        assert key not in series, f"twice: {key}"
        series[key] = value
    return series, types


def value(series: Series, family: str, /, **labels: str) -> float | None:
    return series.get((family, tuple(sorted(labels.items()))))


# --- runs of the canary ---------------------------------------------------------------------------


def run(host: Host, canary: ModuleType, folder: Path, smi: str = "") -> int:
    """The canary once with --metrics-dir `folder` (and --nvidia-smi `smi`: none by default)."""
    argv = [
        *("--config", str(host.config), "--state-dir", str(host.state)),
        *("--timeout", "5", "--failures", "2"),
        *("--systemctl", str(host.systemctl), "--journalctl", str(host.journalctl)),
        *("--metrics-dir", str(folder), "--nvidia-smi", smi or str(folder / "no-nvidia-smi")),
    ]
    now = host.now
    code: int = canary.main(argv) if now is None else canary.main(argv, clock=lambda: now)
    return code


def scraped(folder: Path) -> Series:
    return parse_exposition((folder / "gpuprov_canary.prom").read_text())[0]


def test_a_healthy_server_is_up(tmp_path: Path, stub: Stub, canary: ModuleType) -> None:
    host, folder = Host(tmp_path, stub), tmp_path / "textfiles"
    assert run(host, canary, folder) == 0
    text = (folder / "gpuprov_canary.prom").read_text()
    series, types = parse_exposition(text)
    assert value(series, "gpuprov_service_up", **LABELS) == 1
    assert value(series, "gpuprov_service_loading", **LABELS) == 0
    assert value(series, "gpuprov_service_idle", **LABELS) == 0
    assert value(series, "gpuprov_service_consecutive_failures", **LABELS) == 0
    assert value(series, "gpuprov_service_systemd_restarts", **LABELS) == 0  # NRestarts=0
    assert value(series, "gpuprov_service_canary_restarts_total", **LABELS) == 0
    latency = value(series, "gpuprov_service_probe_latency_seconds", **LABELS)
    assert latency is not None and 0 < latency < 5
    stamp = value(series, "gpuprov_canary_last_run_timestamp_seconds")
    assert stamp is not None and abs(stamp - time.time()) < 60
    assert types["gpuprov_service_canary_restarts_total"] == "counter"
    assert types["gpuprov_service_up"] == "gauge"
    assert not [k for k in series if k[0].startswith("gpuprov_gpu_")]  # no nvidia-smi here


def test_the_textfile_is_renamed_into_place_and_readable_by_node_exporter(
    tmp_path: Path, stub: Stub, canary: ModuleType
) -> None:
    host, folder = Host(tmp_path, stub), tmp_path / "textfiles"
    run(host, canary, folder)
    first = (folder / "gpuprov_canary.prom").stat().st_ino
    run(host, canary, folder)
    path = folder / "gpuprov_canary.prom"
    assert path.stat().st_ino != first  # a new file renamed over the old one, not rewritten
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert sorted(p.name for p in folder.iterdir()) == ["gpuprov_canary.prom"]  # no leftovers


def test_failures_in_a_row_then_the_canarys_restart_then_up(
    tmp_path: Path, stub: Stub, canary: ModuleType
) -> None:
    host, folder = Host(tmp_path, stub), tmp_path / "textfiles"
    stub.completion = [(500, "{}"), (500, "{}"), (200, '{"content": "x"}')]
    seen = []
    for _ in range(3):
        run(host, canary, folder)
        series = scraped(folder)
        seen.append(
            tuple(
                value(series, f"gpuprov_service_{name}", **LABELS)
                for name in ("up", "consecutive_failures", "canary_restarts_total")
            )
        )
    assert seen == [(0, 1, 0), (0, 2, 1), (1, 0, 1)]
    assert f"restart {UNIT}" in host.systemctl_calls
    # the counter is kept in the state dir: a new run starts from it
    assert (host.state / f"{UNIT}.restarts").read_text() == "1"


def test_a_loading_server_is_loading_not_failing(
    tmp_path: Path, stub: Stub, canary: ModuleType
) -> None:
    host, folder = Host(tmp_path, stub), tmp_path / "textfiles"
    stub.health = [(503, '{"error": {"code": 503, "message": "Loading model"}}')]
    assert run(host, canary, folder) == 0
    series = scraped(folder)
    assert value(series, "gpuprov_service_loading", **LABELS) == 1
    assert value(series, "gpuprov_service_up", **LABELS) == 0
    assert value(series, "gpuprov_service_consecutive_failures", **LABELS) == 0


def test_a_unit_systemd_restarts_is_failing_with_its_restarts(
    tmp_path: Path, stub: Stub, canary: ModuleType
) -> None:
    host, folder = Host(tmp_path, stub), tmp_path / "textfiles"
    host.unit_state("crash-loop")
    host.journal("crash-loop")
    assert run(host, canary, folder) == 1
    series = scraped(folder)
    assert value(series, "gpuprov_service_up", **LABELS) == 0
    assert value(series, "gpuprov_service_systemd_restarts", **LABELS) == 39  # NRestarts=39
    assert value(series, "gpuprov_service_consecutive_failures", **LABELS) == 1
    assert value(series, "gpuprov_service_canary_restarts_total", **LABELS) == 0
    assert value(series, "gpuprov_service_probe_latency_seconds", **LABELS) is None  # no probe


def test_an_on_demand_server_stopped_on_purpose_is_idle(
    tmp_path: Path, stub: Stub, canary: ModuleType
) -> None:
    host, folder = Host(tmp_path, stub), tmp_path / "textfiles"
    rows = host.config.read_text().splitlines()
    host.config.write_text(
        "\n".join(r.rsplit("\t", 1)[0] + "\ton_demand" if r.startswith(UNIT) else r for r in rows)
    )
    host.unit_state("stopped")
    assert run(host, canary, folder) == 0
    series = scraped(folder)
    assert value(series, "gpuprov_service_idle", **LABELS) == 1
    assert value(series, "gpuprov_service_up", **LABELS) == 0
    assert value(series, "gpuprov_service_consecutive_failures", **LABELS) == 0


def test_a_folder_that_cannot_be_written_is_logged_not_fatal(
    tmp_path: Path, stub: Stub, canary: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    host = Host(tmp_path, stub)
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    assert run(host, canary, blocked) == 0  # the server is fine: so is the run
    assert "metrics not written: " in capsys.readouterr().out


def test_no_metrics_dir_writes_nothing_and_keeps_no_counts(
    tmp_path: Path, stub: Stub, canary: ModuleType
) -> None:
    host = Host(tmp_path, stub)
    assert host.run(canary) == 0
    assert sorted(p.name for p in host.state.iterdir()) == []


# --- the text format ------------------------------------------------------------------------------


def row(canary: ModuleType, unit: str, kind: str = "llama") -> object:
    return canary.Row(unit, canary.service_name(unit), kind, canary.Checked("ok", 0.25), 0, 3)


def test_hostile_unit_names_are_escaped(canary: ModuleType) -> None:
    unit = 'gpuprov-llama-a"b\\c\nd\\n.service'
    text = canary.exposition([row(canary, unit, 'kind "x"')], 1_700_000_000.0)
    assert '\\"' in text and "\\\\" in text and "\\n" in text
    series, _ = parse_exposition(text)
    labels = {"unit": unit, "service": 'a"b\\c\nd\\n', "kind": 'kind "x"'}
    assert value(series, "gpuprov_service_up", **labels) == 1
    assert value(series, "gpuprov_service_canary_restarts_total", **labels) == 3
    assert value(series, "gpuprov_canary_last_run_timestamp_seconds") == 1_700_000_000


@given(units=st.lists(hostile_text(), min_size=1, max_size=4, unique=True))
def test_property_any_unit_names_make_a_valid_textfile(
    canary: ModuleType, units: list[str]
) -> None:
    text = canary.exposition([row(canary, u) for u in units], 1.5)
    series, _ = parse_exposition(text)
    ups = {dict(k[1])["unit"]: v for k, v in series.items() if k[0] == "gpuprov_service_up"}
    assert ups == dict.fromkeys(units, 1.0)


def test_service_names(canary: ModuleType) -> None:
    assert canary.service_name("gpuprov-llama-alpha.service") == "alpha"
    assert canary.service_name("gpuprov-vllm-r1.service") == "r1"
    assert canary.service_name("nginx.service") == "nginx"


# --- GPU gauges: nvidia-smi -----------------------------------------------------------------------


def capture_line(name: str, starts: str) -> str:
    """The line of a recorded capture that starts with `starts`."""
    lines = (CAPTURES / name).read_text().splitlines()
    return next(line for line in lines if line.startswith(starts))


def test_values_nvidia_smi_has_not_are_left_out_never_zero(canary: ModuleType) -> None:
    """GB10 (unified memory): nvidia-smi prints [N/A] for every framebuffer field (recorded in
    marimo#6822 and nvitop#208); the GPU's other values are still written."""
    recorded = capture_line("nvsmi_query-csv_table_gb10__marimo-pr6822_580.95.05.txt", "0, ")
    index, name, total, used, _free = (f.strip() for f in recorded.split(","))
    assert total == used == "[N/A]"
    header, values = (
        capture_line("nvml_query-csv_gb10__nvitop-pr208_580.173.02.txt", p)
        for p in ("memory.total", "[N/A]")
    )
    names = [h.split(" [")[0].strip() for h in header.split(",")]
    read = dict(zip(names, values.split(", "), strict=True))
    util, power, temp = (
        read[k].split()[0] for k in ("utilization.gpu", "power.draw", "temperature.gpu")
    )
    line = f"{index}, GPU-x, {name}, {used}, {total}, {util}, {temp}, {power}"
    [gpu] = canary.parse_gpus(line)
    assert gpu["labels"] == {"gpu": "0", "uuid": "GPU-x", "name": "NVIDIA GB10"}
    assert "gpuprov_gpu_memory_used_bytes" not in gpu
    assert "gpuprov_gpu_memory_total_bytes" not in gpu
    assert gpu["gpuprov_gpu_utilization_ratio"] == 0
    assert gpu["gpuprov_gpu_power_watts"] == 11.17
    assert gpu["gpuprov_gpu_temperature_celsius"] == 35
    series, _ = parse_exposition(canary.exposition([], 1.0, [gpu]))
    assert not [k for k in series if k[0] == "gpuprov_gpu_memory_used_bytes"]


@pytest.mark.parametrize("text", ["[N/A]", "N/A", "[Not Supported]", "[Unknown Error]", "", "nan"])
def test_a_value_that_is_not_a_number_is_none(canary: ModuleType, text: str) -> None:
    assert canary.measurement(text) is None


def standin(tmp_path: Path, description: Path) -> Path:
    """An nvidia-smi that runs the stand-in with `description`."""
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        f"#!/bin/sh\nSTANDIN_NVIDIA_SMI_CONFIG={description} exec {sys.executable} "
        f'{STANDIN_SMI} "$@"\n'
    )
    smi.chmod(0o755)
    return smi


def test_gpu_gauges_from_the_standin(tmp_path: Path, stub: Stub, canary: ModuleType) -> None:
    """Two RTX 3090s as the end-to-end tests' stand-in describes them; it does not answer
    --query-compute-apps (it exits 64), so there are no per-process series, and the run goes on."""
    host, folder = Host(tmp_path, stub), tmp_path / "textfiles"
    assert run(host, canary, folder, str(standin(tmp_path, GPUS_580))) == 0
    series = scraped(folder)
    for index, uuid in enumerate(UUIDS_3090):
        labels = {"gpu": str(index), "uuid": uuid, "name": NAME_3090}
        assert value(series, "gpuprov_gpu_memory_used_bytes", **labels) == 1 * 1024 * 1024
        assert value(series, "gpuprov_gpu_memory_total_bytes", **labels) == 24576 * 1024 * 1024
        assert value(series, "gpuprov_gpu_utilization_ratio", **labels) == 0
        assert value(series, "gpuprov_gpu_power_watts", **labels) == 21.35
        assert value(series, "gpuprov_gpu_temperature_celsius", **labels) == 34 + index
    assert not [k for k in series if k[0] == "gpuprov_gpu_process_memory_used_bytes"]
    assert value(series, "gpuprov_service_up", **LABELS) == 1


def test_an_nvidia_smi_without_a_driver_leaves_the_gpus_out(
    tmp_path: Path, stub: Stub, canary: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    host, folder = Host(tmp_path, stub), tmp_path / "textfiles"
    smi = standin(tmp_path, tmp_path / "no-description.json")  # the stand-in: no driver
    assert run(host, canary, folder, str(smi)) == 0
    assert not [k for k in scraped(folder) if k[0].startswith("gpuprov_gpu_")]
    assert "GPU metrics left out: nvidia-smi exited 9" in capsys.readouterr().out


def test_gpu_names_with_commas_and_repeated_gpus(canary: ModuleType) -> None:
    text = "0, GPU-a, Some, GPU, 10, 20, 30, 40, 50.5\n0, GPU-a, again, 1, 2, 3, 4, 5\nshort, 1\n"
    [gpu] = canary.parse_gpus(text)
    assert gpu["labels"]["name"] == "Some, GPU"
    assert gpu["gpuprov_gpu_power_watts"] == 50.5


def test_process_memory_with_its_unit(canary: ModuleType) -> None:
    units = {"2101": "gpuprov-llama-alpha.service", "3300": "docker-4f4f.scope"}
    text = "2101, GPU-a, 20110\n2101, GPU-b, 512\n3300, GPU-a, [N/A]\n9999, GPU-a, 100\nx, y, 1\n"
    samples = canary.parse_apps(text, lambda pid: units.get(pid, ""))
    assert samples == [
        ({"pid": "2101", "gpu_uuid": "GPU-a", "unit": units["2101"]}, 20110 * 1024 * 1024),
        ({"pid": "2101", "gpu_uuid": "GPU-b", "unit": units["2101"]}, 512 * 1024 * 1024),
        ({"pid": "9999", "gpu_uuid": "GPU-a", "unit": ""}, 100 * 1024 * 1024),
    ]
    series, _ = parse_exposition(canary.exposition([], 1.0, [], samples))
    assert len(series) == 4  # three processes and the run's timestamp


@pytest.mark.parametrize(
    ("cgroup", "unit"),
    [
        ("0::/system.slice/gpuprov-llama-alpha.service\n", "gpuprov-llama-alpha.service"),
        ("0::/system.slice/docker-" + "4f" * 32 + ".scope\n", "docker-" + "4f" * 32 + ".scope"),
        (
            "12:memory:/system.slice/gpuprov-vllm-r.service\n"
            "1:name=systemd:/system.slice/gpuprov-vllm-r.service\n0::/system.slice/x.service\n",
            "x.service",
        ),
        ("0::/user.slice/user-1000.slice/session-3.scope\n", "session-3.scope"),
        ("0::/\n", ""),
        ("", ""),
    ],
)
def test_the_unit_of_a_process(canary: ModuleType, cgroup: str, unit: str) -> None:
    assert canary.cgroup_unit(cgroup) == unit


@given(text=hostile_lines(["0, GPU-a, NVIDIA X, 1, 2, 3, 4, 5.5", "0, GPU-a, N, [N/A], 2, 3, 4"]))
def test_property_gpu_lines_never_raise_and_make_a_valid_textfile(
    canary: ModuleType, text: str
) -> None:
    gpus = canary.parse_gpus(text)
    apps = canary.parse_apps(text, lambda pid: text[:20])
    for gpu in gpus:
        assert all(math.isfinite(v) for k, v in gpu.items() if k != "labels")
    parse_exposition(canary.exposition([], 1.0, gpus, apps))
    canary.cgroup_unit(text)


# --- settings -------------------------------------------------------------------------------------


def test_metrics_go_to_debians_node_exporter_folder_by_default() -> None:
    """Debian's prometheus-node-exporter reads /var/lib/prometheus/node-exporter when ARGS names
    no other folder (its --collector.textfile.directory default)."""
    assert stack.from_data({}).canary.metrics_dir == "/var/lib/prometheus/node-exporter"
    assert stack.from_data({"canary_metrics_dir": ""}).canary.metrics_dir == ""


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"canary_metrics_dir": "relative/dir"}, "canary_metrics_dir"),
        ({"canary_metrics_dir": "/a b"}, "canary_metrics_dir"),
        ({"canary_metrics_dir": "", "canary_node_exporter": True}, "canary_node_exporter"),
        ({"canary_node_exporter": "yes"}, "canary_node_exporter"),
    ],
)
def test_metrics_settings_refused(data: dict[str, object], key: str) -> None:
    with pytest.raises(StackError) as caught:
        stack.from_data(data)
    assert key in str(caught.value)
