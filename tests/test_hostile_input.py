"""Hostile input to check, facts and explain: odd digits, deep JSON, nulls, markup, terminal
escapes, pipes with no writer, huge values. Each ends as a result or exit 2 naming the file, never
a traceback, a hang, or an escape sequence reaching the terminal."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from checks import inputs, versions
from checks.facts import model
from checks.facts.model import HostFacts, from_dict, to_dict
from provision.cli import app, expand_from
from provision.output import printable
from tests.conftest import REAL
from tests.support.hostile import (
    CONTROL,
    ESCAPES,
    UNICODE_DIGITS,
    hostile_lines,
    hostile_text,
    json_values,
    nested_json,
)

GPUPROV = Path(sys.executable).parent / "gpuprov"
runner = CliRunner()
# What may not reach a terminal from input: C0 (but newline and tab), DEL, C1, line separators.
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
LOG_LINES = (REAL / "err_nokernel_vllm__vllm-18995_rtx5090-docker.txt").read_text().splitlines()


def run(*args: str, stdin: str | None = None) -> Any:
    return runner.invoke(app, expand_from(list(args)), input=stdin)


def assert_clean(result: Any) -> None:
    """Exit 0, 1 or 2; no traceback; nothing a terminal would act on."""
    out = result.stdout + result.stderr
    assert result.exit_code in (0, 1, 2), out[-2000:]
    assert "Traceback" not in out and "internal error" not in out, out[-2000:]
    assert not RAW_CONTROL.search(out), repr(RAW_CONTROL.search(out))


def facts_json(**parts: Any) -> str:
    return json.dumps({"schema_version": 1, "driver": {}, **parts})


# --- versions ----------------------------------------------------------------------------------


ARABIC_INDIC, FULLWIDTH, SUPERSCRIPT = "\u0660", "\uff10", "\u2070\u00b9\u00b2\u00b3"


def _digits(zero: str, text: str) -> str:
    """`text` with its ASCII digits written from another digit block starting at `zero`."""
    return "".join(chr(ord(zero) + int(c)) if c.isdigit() else c for c in text)


@pytest.mark.parametrize(
    "text",
    [
        _digits(ARABIC_INDIC, "580.65.06"),
        _digits(FULLWIDTH, "580.65.06"),
        "\u00b9\u00b2\u2070\u2078\u2070",  # superscripts: isdigit() but not int()
        "9" * 5000,
    ],
)
def test_versions_in_odd_digits_are_unknown(text: str) -> None:
    assert versions.driver(text) is None
    assert versions.cuda(text) is None
    assert versions.kernel(text) is None
    assert versions.parse(text) is None
    assert versions.torch_cuda(text) is None
    assert versions.torch_cuda("2.6.0+cu" + text) is None


@pytest.mark.parametrize("text", ["6." + "9" * 5000, "580." + "1" * 5000, "1.2." + "3" * 5000])
def test_numbers_past_4300_digits_do_not_raise(text: str) -> None:
    """int() refuses more than 4,300 digits; a version reads them as unknown or ignores them."""
    versions.driver(text)
    versions.cuda(text)
    versions.kernel(text)
    assert versions.parse(text) is None


def test_real_versions_still_read() -> None:
    assert str(versions.driver("R570 570.124.04")) == "570.124.04"
    assert str(versions.cuda("12080")) == "12.8"
    kernel = versions.kernel("6.8.0-45-generic")
    assert kernel is not None and (str(kernel.version), kernel.abi) == ("6.8.0", 45)


def test_a_version_in_a_huge_value_is_read_from_its_head() -> None:
    assert str(versions.driver("570.124.04 " + "5" * 10_000_000)) == "570.124.04"
    assert versions.driver("5" * 10_000_000) is None


@given(hostile_text())
def test_property_versions_never_raise(text: str) -> None:
    for read in (versions.driver, versions.cuda, versions.release, versions.kernel):
        read(text)
    versions.parse(text)
    versions.torch_cuda(text)
    versions.branch(text)


# --- JSON and facts files ----------------------------------------------------------------------


def test_deep_json_is_refused_not_a_recursion_error() -> None:
    with pytest.raises(inputs.InputError, match="nested deeper"):
        inputs.loads(nested_json(100_000))
    with pytest.raises(inputs.InputError, match="nested deeper"):
        inputs.loads(nested_json(inputs.MAX_JSON_DEPTH + 1))
    assert inputs.loads(nested_json(inputs.MAX_JSON_DEPTH)) == json.loads(
        nested_json(inputs.MAX_JSON_DEPTH)
    )
    with pytest.raises(inputs.InputError):
        inputs.raw_decode("noise " + nested_json(100_000), 6)


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"gpus": [None]}, "gpus[0]: expected an object, got null"),
        ({"gpus": [{"memory_total_mib": "8 GiB"}]}, "gpus[0].memory_total_mib: expected an int"),
        ({"gpus": [{"memory_total_mib": True}]}, "gpus[0].memory_total_mib: expected an integer"),
        ({"toolkits": [{"gpu_archs": ["sm_90", None]}]}, "toolkits[0].gpu_archs[1]: expected a"),
        ({"probes": [{}]}, "probes[0].name: missing"),
        ({"probes": [{"name": "x"}]}, "probes[0].status: missing"),
        ({"sources": None}, "sources: expected a list, got null"),
        ({"vllm_services": [{"argv": None}]}, "vllm_services[0].argv: expected a list"),
        ({"containers": {"images": [7]}}, "containers.images[0]: expected an object, got an"),
    ],
)
def test_facts_that_do_not_fit_name_the_first_bad_path(data: dict[str, Any], path: str) -> None:
    with pytest.raises(ValueError) as raised:
        from_dict(HostFacts, {"schema_version": 1, **data})
    assert str(raised.value).startswith(path)


def test_unknown_values_stay_null() -> None:
    facts = from_dict(HostFacts, {"gpus": [{"memory_total_mib": None, "name": None}]})
    assert facts.gpus[0].memory_total_mib is None


def _leaf_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [path] + [p for k, v in value.items() for p in _leaf_paths(v, (*path, k))]
    if isinstance(value, list):
        return [path] + [p for i, v in enumerate(value) for p in _leaf_paths(v, (*path, i))]
    return [path]


def _full_facts() -> dict[str, Any]:
    """A facts dict with one item in every list, so every field has a path."""
    facts = HostFacts(
        gpus=[model.Gpu()],
        toolkits=[model.Toolkit(gpu_archs=["sm_90"])],
        compat=[model.CompatLibrary()],
        python=[model.PythonPackage(name="torch")],
        llamacpp=[model.LlamaCppBuild()],
        vllm_services=[model.VllmService(argv=["--x"])],
        llama_servers=[model.LlamaServer()],
        probes=[model.ProbeResult("p", "ok")],
    )
    facts.containers.docker = model.Docker(runtimes=["nvidia"])
    facts.containers.images = [model.ContainerImage()]
    data: dict[str, Any] = to_dict(facts)
    return data


FULL = _full_facts()
PATHS = [p for p in _leaf_paths(FULL) if p]


@st.composite
def spoiled_facts(draw: st.DrawFn) -> dict[str, Any]:
    """A real facts dict with some fields replaced by hostile values, or dropped."""
    data = json.loads(json.dumps(FULL))
    for path in draw(st.lists(st.sampled_from(PATHS), max_size=6)):
        parent: Any = data
        try:
            for key in path[:-1]:
                parent = parent[key]
            if draw(st.booleans()) and isinstance(parent, dict):
                parent.pop(path[-1], None)
            else:
                parent[path[-1]] = draw(json_values | hostile_text())
        except (KeyError, IndexError, TypeError):
            continue
    return data


@given(json_values)
def test_property_facts_from_any_json_value(value: Any) -> None:
    try:
        from_dict(HostFacts, value)
    except ValueError as exc:
        assert str(exc)


@given(spoiled_facts())
def test_property_facts_from_spoiled_facts(data: dict[str, Any]) -> None:
    """Nulls in lists, missing fields, wrong kinds: a HostFacts whose every field has the type it
    declares, or a ValueError."""
    try:
        facts = from_dict(HostFacts, data)
    except ValueError as exc:
        assert str(exc)
        return
    assert all(isinstance(g, model.Gpu) for g in facts.gpus)
    assert all(isinstance(p.name, str) for p in facts.probes)
    assert isinstance(facts.sources, list)


@given(st.integers(min_value=1, max_value=3000))
def test_property_nested_json_loads_or_refuses(depth: int) -> None:
    try:
        inputs.loads(nested_json(depth))
    except inputs.InputError:
        assert depth > inputs.MAX_JSON_DEPTH


# --- the command line --------------------------------------------------------------------------


def test_deep_json_given_to_from_is_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text(nested_json(100_000))
    result = run("check", "--from", str(path))
    assert result.exit_code == 2
    assert "deep.json" in result.stderr and "nested deeper" in result.stderr


def test_null_in_a_facts_list_is_exit_2_naming_the_path(tmp_path: Path) -> None:
    path = tmp_path / "facts.json"
    path.write_text(facts_json(gpus=[None]))
    result = run("check", "--from", str(path))
    assert result.exit_code == 2
    assert "facts.json" in result.stderr and "gpus[0]: expected an object" in result.stderr


def test_odd_digits_in_facts_are_unknown_versions(tmp_path: Path) -> None:
    path = tmp_path / "facts.json"
    path.write_text(
        facts_json(
            driver={"version": "٥٨٠.٦٥.٠٦", "cuda_version": "¹²⁰⁸⁰"},
            system={"kernel_release": "6." + "9" * 5000},
        )
    )
    assert_clean(run("check", "--from", str(path)))
    assert_clean(run("check", "--json", "--from", str(path)))


def test_markup_and_escapes_from_input_are_shown_not_obeyed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # short names: the text view wraps at 80 columns
    path = Path("[bold]facts\x1b[2J.json")
    path.write_text(
        facts_json(gpus=[{"index": 0, "name": "[/]\x1b[2J\x1b]0;owned\x07", "pci_bus_id": "[/"}])
    )
    result = run("facts", "--from", str(path))
    assert_clean(result)
    assert "[bold]facts\\x1b[2J.json" in result.stdout
    assert "[/]\\x1b[2J" in result.stdout


def test_escapes_in_a_log_line_and_its_name_are_shown_not_obeyed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = Path("vllm[dim]\x1b[31m.log")
    path.write_text(
        "\n".join(LOG_LINES) + "\nRuntimeError: CUDA error: no kernel image \x1b[2J[/]\\\n"
    )
    result = run("explain", str(path))
    assert_clean(result)
    assert result.exit_code == 1
    assert "vllm[dim]\\x1b[31m.log" in result.stdout


def test_an_escape_in_a_missing_file_name_is_shown_in_the_error() -> None:
    result = run("check", "--from", "/nonexistent/\x1b[2J")
    assert result.exit_code == 2
    assert "\\x1b[2J" in result.stderr and "\x1b" not in result.stderr


def test_a_huge_value_is_cut_in_text_and_whole_in_json(tmp_path: Path) -> None:
    value = "570.124.04 " + "x" * 10_000_000
    path = tmp_path / "facts.json"
    path.write_text(facts_json(driver={"version": value}))
    text = run("facts", "--from", str(path))
    assert text.exit_code == 0
    assert f"({len(value) - 2000} more characters not shown)" in text.stdout
    assert len(text.stdout) < 20_000
    data = json.loads(run("facts", "--json", "--from", str(path)).stdout)
    assert data["driver"]["version"] == value


@pytest.mark.parametrize("command", [["check", "--from"], ["facts", "--from"], ["explain"]])
def test_a_fifo_with_no_writer_does_not_block(tmp_path: Path, command: list[str]) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    done = subprocess.run(
        [str(GPUPROV), *command, str(fifo)],
        capture_output=True,
        text=True,
        timeout=120,  # a hang fails here instead of stopping the suite
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"gpuprov: {fifo}: cannot read: a pipe with no writer\n"


def test_a_fifo_with_a_writer_is_read(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    data = tmp_path / "facts.json"
    data.write_text(facts_json(driver={"version": "570.124.04"}))
    # The writer is another process: its open() blocks until gpuprov opens the FIFO. (A thread
    # would block this whole process once gevent has patched threading, as pyinfra's CLI does.)
    writer = subprocess.Popen(["sh", "-c", 'exec cat -- "$1" > "$2"', "sh", str(data), str(fifo)])
    try:
        result = run("facts", "--json", "--from", str(fifo))
    finally:
        writer.kill()
        writer.wait(timeout=10)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["driver"]["version"] == "570.124.04"


def test_a_pipe_is_read(tmp_path: Path) -> None:
    """`--from <(command)`: a pipe with a writer is read like a file. gpuprov runs in its own
    process, as it does for the user (in this one, gevent may hold a pipe's write end open)."""
    data = tmp_path / "facts.json"
    data.write_text(facts_json(driver={"version": "570.124.04"}))
    done = subprocess.run(
        ["bash", "-c", '"$1" facts --json --from <(cat -- "$2")', "bash", str(GPUPROV), str(data)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["driver"]["version"] == "570.124.04"


@pytest.mark.parametrize("path", ["/dev/zero", "/"])
def test_devices_and_directories_are_refused(path: str) -> None:
    result = run("check", "--from", path)
    assert result.exit_code == 2
    assert path in result.stderr and "not a file" in result.stderr


@given(hostile_text())
def test_property_printable_leaves_no_control_character(text: str) -> None:
    shown = printable(text)
    assert not RAW_CONTROL.search(shown) and "\n" not in shown
    assert not RAW_CONTROL.search(printable(text, lines=True))
    assert all(e not in printable(text + e) for e in ESCAPES)


@given(st.one_of(hostile_text(), st.text(alphabet=CONTROL + UNICODE_DIGITS + "[]/\\{}")))
def test_property_check_from_any_text(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    path = tmp_path_factory.mktemp("from") / "capture.txt"
    path.write_text(text, errors="surrogatepass")
    assert_clean(run("check", "--from", str(path)))


@given(spoiled_facts())
def test_property_check_and_facts_from_a_spoiled_facts_file(
    tmp_path_factory: pytest.TempPathFactory, data: dict[str, Any]
) -> None:
    path = tmp_path_factory.mktemp("facts") / "facts.json"
    path.write_text(json.dumps(data))
    assert_clean(run("check", "--from", str(path)))
    assert_clean(run("facts", "--from", str(path)))


@given(hostile_lines(LOG_LINES))
def test_property_explain_any_log(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    path = tmp_path_factory.mktemp("log") / "vllm.log"
    path.write_text(text, errors="surrogatepass")
    assert_clean(run("explain", str(path)))
