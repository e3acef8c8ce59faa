"""A llama-server command line read as llama.cpp reads it, and what a build refuses of it.

The builds' options come from their recorded --help (tests/fixtures/llama_server/); the command
lines from the llama_server role's own `args`, as the unit runs them.
"""

from __future__ import annotations

import pytest

from checks.facts.model import LlamaServer
from checks.services.llama_server_args import is_flag, refused, server, settings
from checks.services.llama_server_help import Options, parse_help
from provision import stack
from tests.conftest import FIXTURES

NEW = parse_help((FIXTURES / "llama_server" / "help_llama-cpp-python-0.3.36.txt").read_text())
OLD = parse_help((FIXTURES / "llama_server" / "help_b6784_genai-electron.txt").read_text())
# The two lines of -fa in the --help of a build where it was a switch, as a public project
# committed that help: https://github.com/dieharders/obrew-studio-server/blob/
# c4086610c20cd6c33fc65c9c271420080934e61f/assets/llama.md
SWITCH_FA = parse_help(
    "-fa,   --flash-attn                     enable Flash Attention (default: disabled)\n"
    "                                        (env: LLAMA_ARG_FLASH_ATTN)\n"
)
PROFILE = {
    "name": "qwen",
    "model": "/srv/models/qwen.gguf",
    "port": 8080,
    "ctx_size": 32768,
    "parallel": 4,
    "gpu_layers": "all",
    "flash_attn": "on",
    "cache_type_k": "q8_0",
    "cache_type_v": "q8_0",
    "threads": 8,
    "mlock": True,
}


def argv(**profile: object) -> list[str]:
    data = {"llama_server_profiles": [{**PROFILE, **profile}]}
    return stack.from_data(data).profiles[0].args()


def test_the_settings_as_the_unit_passes_them() -> None:
    found = server("qwen", argv(), mlock=True)
    assert found == LlamaServer(
        name="qwen",
        argv=argv(),
        model="/srv/models/qwen.gguf",
        ctx_size=32768,
        parallel=4,
        n_gpu_layers="all",
        flash_attn="on",
        cache_type_k="q8_0",
        cache_type_v="q8_0",
        mlock=True,
    )


@pytest.mark.parametrize("options", [None, NEW, OLD], ids=["no-help", "new", "old"])
@pytest.mark.parametrize(
    ("extra", "field", "value"),
    [
        (["-c", "65536"], "ctx_size", 65536),
        (["--ctx-size", "65536"], "ctx_size", 65536),
        (["--ctx_size", "65536"], "ctx_size", 65536),
        (["--ctx-size=65536"], "ctx_size", 65536),
        (["-np", "8"], "parallel", 8),
        (["-ngl", "20"], "n_gpu_layers", "20"),
        (["--gpu-layers", "-1"], "n_gpu_layers", "-1"),
        (["-ctv", "q4_0"], "cache_type_v", "q4_0"),
        (["-ctk", "Q4_0"], "cache_type_k", "q4_0"),
        (["-fa", "off"], "flash_attn", "off"),
        (["--flash-attn", "false"], "flash_attn", "off"),
        (["-m", "/srv/models/other.gguf"], "model", "/srv/models/other.gguf"),
        (["-md", "/srv/models/draft.gguf"], "model_draft", "/srv/models/draft.gguf"),
        (["--mmproj", "/srv/models/mmproj.gguf"], "mmproj", "/srv/models/mmproj.gguf"),
        (["--jinja", "-c", "1024", "--no-webui"], "ctx_size", 1024),
        (["-c", "1024", "-c", "2048"], "ctx_size", 2048),
    ],
)
def test_extra_args_override_the_settings(
    options: Options | None, extra: list[str], field: str, value: object
) -> None:
    """The last occurrence wins, whatever name or form sets it."""
    found = server("qwen", argv(extra_args=extra), options)
    assert getattr(found, field) == value


def test_the_draft_model_by_its_newest_name_through_the_build_help() -> None:
    extra = ["--spec-draft-model", "/srv/models/draft.gguf"]
    assert server("q", argv(extra_args=extra), NEW).model_draft == "/srv/models/draft.gguf"


@pytest.mark.parametrize(
    ("options", "extra", "flash", "cache_v"),
    [
        (None, ["-fa", "-ctv", "q4_0"], "on", "q4_0"),  # the old switch, unknown build
        (SWITCH_FA, ["-fa", "-ctv", "q4_0"], "on", "q4_0"),
        (SWITCH_FA, ["-fa", "off"], "on", "q8_0"),  # "off" is a stray argument there
        (None, ["-fa", "auto"], "auto", "q8_0"),
        (NEW, ["-fa", "-ctv", "q4_0"], "-ctv", "q8_0"),  # a newer build takes -ctv as its value
    ],
)
def test_flash_attn_switch_or_value(
    options: Options | None, extra: list[str], flash: str, cache_v: str
) -> None:
    found = server("q", argv(flash_attn="off", extra_args=extra), options)
    assert (found.flash_attn, found.cache_type_v) == (flash, cache_v)


def test_values_of_unknown_flags_are_skipped() -> None:
    found = settings(["--foo", "-c", "--bar", "7", "-c", "9", "--switch", "-np", "3"])
    assert found == {"ctx_size": "9", "parallel": "3"}


def test_settings_not_given_stay_unknown() -> None:
    found = server("q", ["--port", "8080", "--ctx-size", "many"])
    assert (found.model, found.ctx_size, found.flash_attn, found.rejected) == (
        None,
        None,
        None,
        None,
    )


@pytest.mark.parametrize("token", ["-c", "--ctx-size", "-fa", "-x=1"])
def test_flags(token: str) -> None:
    assert is_flag(token)


@pytest.mark.parametrize("token", ["-1", "-0.5", "-", "q4_0", ""])
def test_not_flags(token: str) -> None:
    assert not is_flag(token)


@pytest.mark.parametrize("options", [NEW, OLD], ids=["new", "old"])
def test_both_builds_accept_what_the_role_passes(options: Options) -> None:
    assert refused(argv(), options) == []
    assert refused(argv(gpu_layers="", threads=0, flash_attn="auto"), options) == []


@pytest.mark.parametrize(
    ("extra", "new", "old"),
    [
        (["--mlock"], ["--mlock"], []),
        (["--no-mmap"], ["--no-mmap"], []),
        (["-lm", "mmap+mlock"], [], ["-lm"]),  # its value goes with it
        (["--load-mode", "none", "-c", "512"], [], ["--load-mode"]),
        (["--ctx_size", "512"], [], []),
        (["--jinja", "-kvu"], [], []),
        (
            ["--ctx-size=65536"],
            ["--ctx-size=65536 (llama.cpp takes the value as the next argument: --ctx-size 65536)"],
            ["--ctx-size=65536 (llama.cpp takes the value as the next argument: --ctx-size 65536)"],
        ),
        (["--no-such-flag=1"], ["--no-such-flag=1"], ["--no-such-flag=1"]),
        (["--mmproj"], ["--mmproj without its value"], ["--mmproj without its value"]),
        (["stray"], ["stray"], ["stray"]),
        (["--mlock", "--no-mmap"], ["--mlock", "--no-mmap"], []),
    ],
)
def test_what_each_build_refuses(extra: list[str], new: list[str], old: list[str]) -> None:
    assert refused(argv(extra_args=extra), NEW) == new
    assert refused(argv(extra_args=extra), OLD) == old


def test_a_value_after_a_switch_is_named_as_such() -> None:
    """--flash-attn was a switch: the role's `--flash-attn on` leaves "on" unclaimed there."""
    assert refused(["--flash-attn", "on", "-c", "1"], SWITCH_FA) == [
        "on (after --flash-attn, which takes no value in this build)",
        "-c",
    ]


def test_what_a_build_refuses_is_a_fact_of_the_server() -> None:
    found = server("q", argv(extra_args=["--mlock"]), NEW, mlock=True)
    assert (found.rejected, found.mlock_supported) == (["--mlock"], True)
    assert server("q", argv(), Options()).rejected is None  # a --help that listed nothing
