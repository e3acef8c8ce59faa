"""llama-server's --help read into options and its --version read, on recorded real output.

tests/fixtures/llama_server/ holds `--help` and `--version` of two builds with different options
(SOURCES.tsv says where each comes from): llama.cpp as vendored in llama-cpp-python 0.3.36, built
CPU-only here (--load-mode, no --mlock), and b6784 as a project committed its help (--mlock).
"""

from __future__ import annotations

import csv
import re

import pytest

from checks.services.llama_server_help import (
    MLOCK_ENV,
    Option,
    Options,
    Version,
    parse_help,
    parse_version,
)
from tests.conftest import FIXTURES

CASES = FIXTURES / "llama_server"
NEW = "help_llama-cpp-python-0.3.36.txt"
OLD = "help_b6784_genai-electron.txt"


def options(name: str) -> Options:
    return parse_help((CASES / name).read_text())


def test_every_fixture_says_where_it_comes_from() -> None:
    with (CASES / "SOURCES.tsv").open(newline="") as handle:
        rows = {row["file"]: row for row in csv.DictReader(handle, delimiter="\t")}
    files = {p.name for p in CASES.iterdir() if p.name != "SOURCES.tsv"}
    assert set(rows) == files
    for row in rows.values():
        assert row["url"].startswith("https://") and row["how"], row


@pytest.mark.parametrize("name", [NEW, OLD])
def test_every_option_line_is_read(name: str) -> None:
    """One option per line starting with a dash, section headers aside (counted by hand here)."""
    lines = (CASES / name).read_text().splitlines()
    starts = [ln for ln in lines if ln.startswith("-") and not ln.startswith("-----")]
    found = options(name).options
    assert len(found) == len(starts) > 150
    assert [o.names[0] for o in found] == [re.split(r"[ ,]", ln)[0] for ln in starts]


@pytest.mark.parametrize("name", [NEW, OLD])
def test_options_the_profiles_use(name: str) -> None:
    found = options(name)
    assert found.find("-c") == found.find("--ctx-size")
    ctx = found.find("--ctx-size")
    assert ctx is not None
    assert (ctx.names, ctx.values, ctx.env) == (("-c", "--ctx-size"), 1, "LLAMA_ARG_CTX_SIZE")
    assert found.find("--ctx_size") == ctx  # llama.cpp reads _ as - in long names
    assert found.find("-c_size") is None
    layers = found.find("-ngl")
    assert layers is not None and layers.names == ("-ngl", "--gpu-layers", "--n-gpu-layers")
    flash = found.find("--flash-attn")
    assert flash is not None and flash.values == 1  # [on|off|auto]: a value, not a switch
    for flag in ("--model", "--alias", "--host", "--port", "--parallel", "--threads"):
        option = found.find(flag)
        assert option is not None and option.values == 1, flag
    for flag in ("--cache-type-k", "--cache-type-v"):
        option = found.find(flag)
        assert option is not None and option.values == 1
        assert "allowed values: f32, f16, bf16, q8_0, q4_0" in option.text


def test_value_hints_count_values() -> None:
    """Two hints are two values; spaces inside <...> do not separate hints."""
    found = options(OLD)
    assert found.find("--control-vector-layer-range") == Option(
        ("--control-vector-layer-range",),
        2,
        None,
        "layer range to apply the control vector(s) to, start and end inclusive",
    )
    scaled = found.find("--lora-scaled")
    assert scaled is not None and scaled.values == 2  # FNAME SCALE
    tensor = found.find("-ot")
    assert tensor is not None and (tensor.names, tensor.values) == (
        ("--override-tensor", "-ot"),
        1,
    )
    assert options(NEW).find("--lora-scaled") == Option(
        ("--lora-scaled",),
        1,  # FNAME:SCALE,... since
        None,
        "path to LoRA adapter with user defined scaling (format: FNAME:SCALE,...) note: use "
        "comma-separated values",
    )


def test_switches_and_their_negations_take_no_value() -> None:
    found = options(NEW)
    unified = found.find("--no-kv-unified")
    assert unified is not None
    assert unified.names == ("-kvu", "--kv-unified", "-no-kvu", "--no-kv-unified")
    assert (unified.values, unified.env) == (0, "LLAMA_ARG_KV_UNIFIED")
    version = found.find("--version")
    assert version is not None and (version.values, version.env) == (0, None)


def test_the_newer_build_replaced_mlock_by_load_mode() -> None:
    new, old = options(NEW), options(OLD)
    for flag in ("--mlock", "--no-mmap"):
        assert new.find(flag) is None
        assert old.find(flag) is not None
    load_mode = new.find("-lm")
    assert load_mode is not None and load_mode.env == "LLAMA_ARG_LOAD_MODE"
    assert "- mmap+mlock: mmap + force system to keep model in RAM" in load_mode.text
    assert old.find("--load-mode") is None
    mlock = old.find("--mlock")
    assert mlock is not None and (mlock.values, mlock.env) == (0, "LLAMA_ARG_MLOCK")


def test_both_builds_can_lock_the_model_through_the_environment() -> None:
    assert options(NEW).mlock() and options(OLD).mlock()
    assert dict(MLOCK_ENV) == {"LLAMA_ARG_MLOCK": "1", "LLAMA_ARG_LOAD_MODE": "mmap+mlock"}


def test_a_load_mode_without_mmap_mlock_cannot() -> None:
    """The first --load-mode builds (llama.cpp#26110: none, mmap, mlock, dio) refuse the value
    mmap+mlock at start, even with --mlock still there: the new build's help less that mode."""
    lines = (CASES / NEW).read_text().splitlines()
    dropped = ("- mmap+mlock:", "swapping or compressing")  # that mode's two lines
    first = [ln for ln in lines if not any(d in ln for d in dropped)]
    assert parse_help("\n".join(first)).find("--load-mode") is not None
    assert not parse_help("\n".join(first)).mlock()
    with_mlock = "\n".join([*first, *(CASES / OLD).read_text().splitlines()])
    assert not parse_help(with_mlock).mlock()
    assert not Options().mlock()


@pytest.mark.parametrize(
    ("name", "version", "label"),
    [
        ("version_b10991_llama-cpp-28971.txt", Version("10991", "930e2fa59"), "b10991 (930e2fa59)"),
        ("version_b4621_llama-cpp-11681.txt", Version("4621", "6eecde3c"), "b4621 (6eecde3c)"),
        ("version_llama-cpp-python-0.3.36.txt", Version(), ""),  # build 0, commit unknown
    ],
)
def test_versions(name: str, version: Version, label: str) -> None:
    assert parse_version((CASES / name).read_text()) == version
    assert version.label() == label


def test_version_without_commit() -> None:
    assert parse_version("version: 9535 (unknown)\n") == Version("9535", None)
    assert Version("9535").label() == "b9535"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\x00\xff garbage\n",
        "-\n--\n-,\n--a,\n--a, \n- -\n-x ,,, -y\n",
        "-c,    --ctx-size N\n(env: LLAMA_ARG_CTX_SIZE)\n",
        "error: invalid argument: --mlock\n",
        "----- common params -----\n\n" * 3,
        "-a <unclosed [ bracket  text\n" + " " * 40 + "(env: X)\n",
        "version: 12 (build x, commit y)\n",
    ],
)
def test_odd_output_never_raises(text: str) -> None:
    found = parse_help(text)
    assert all(o.names and 0 <= o.values <= 2 for o in found.options)
    parse_version(text)


def test_help_lines_after_backend_logs_and_a_blank_line() -> None:
    text = (
        "load_backend: loaded CPU backend from /app/libggml-cpu-haswell.so\n"
        "-c,    --ctx-size N                     size of the prompt context\n"
        "                                        \n"
        "                                        (env: LLAMA_ARG_CTX_SIZE)\n"
        "ggml_cuda_init: found 1 CUDA devices:\n"
        "  Device 0: NVIDIA GeForce RTX 3090, compute capability 8.6, VMM: yes\n"
    )
    assert parse_help(text) == Options(
        (
            Option(
                ("-c", "--ctx-size"),
                1,
                "LLAMA_ARG_CTX_SIZE",
                "size of the prompt context (env: LLAMA_ARG_CTX_SIZE)",
            ),
        )
    )
