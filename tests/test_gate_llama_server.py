"""The gate on llama-server profiles: their arguments as llama.cpp reads them (extra_args too),
their model files, the build that will run them, and their VRAM.

Host facts are the recorded RTX 3090 fixture; the builds' options are their recorded --help
(tests/fixtures/llama_server/), printed on the host side by a stand-in `llama-server` that
writes those recordings, under a real build layout, read by the same script the gate sends.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from checks.facts.model import HostFacts, from_dict, probed_on
from checks.services.llama_server_help import Options, Version, parse_help
from provision import gate, servicefacts, stack
from provision.servicefacts import ServerBinary, ServiceFacts
from tests.conftest import FIXTURES
from tests.support import tiny_gguf

RECORDED = FIXTURES / "llama_server"
NEW = parse_help((RECORDED / "help_llama-cpp-python-0.3.36.txt").read_text())
OLD = parse_help((RECORDED / "help_b6784_genai-electron.txt").read_text())
MAIN = {"name": "main", "model": "/srv/models/m.gguf", "port": 8080}
PATH = "/opt/gpuprov/llama.cpp/builds/x/bin/llama-server"


def facts(name: str = "stack/rtx3090-cuda12.8") -> HostFacts:
    """The recorded facts, named as the gate names what it probed on the host "box"."""
    found = from_dict(HostFacts, json.loads((FIXTURES / f"{name}.json").read_text())["facts"])
    found.sources = [probed_on("gpuprov", "box", "(pyinfra)")]
    return found


def judged(*profiles: dict[str, Any], found: ServiceFacts | None = None) -> gate.HostGate:
    s = stack.from_data({"llama_server_profiles": list(profiles)})
    verdict = gate.judge("box", facts(), s)
    gate.judge_services(verdict, s, found or ServiceFacts())
    return verdict


def binary(options: Options, planned: bool = True, version: Version | None = None) -> ServerBinary:
    return ServerBinary(PATH, planned, version or Version(), options)


def found_rules(verdict: gate.HostGate, rule: str) -> list[str]:
    return [f.message for f in verdict.findings if f.rule == rule]


# --- the same rules on extra_args -----------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "extra", "refused"),
    [
        ({"flash_attn": "off"}, ["-ctv", "q4_0"], True),
        ({}, ["-fa", "off", "-ctv", "q4_0"], True),
        ({"flash_attn": "off"}, ["--cache-type-v", "q8_0"], True),
        ({"flash_attn": "off", "cache_type_v": "q4_0"}, ["-fa", "on"], False),
        ({"flash_attn": "off", "cache_type_v": "q4_0"}, ["-ctv", "f16"], False),
        ({"flash_attn": "off"}, ["-ctk", "q4_0"], False),
    ],
)
def test_extra_args_meet_the_rules_the_settings_meet(
    settings: dict[str, Any], extra: list[str], refused: bool
) -> None:
    verdict = gate.judge(
        "box",
        facts(),
        stack.from_data({"llama_server_profiles": [{**MAIN, **settings, "extra_args": extra}]}),
    )
    found = [f for f in verdict.findings if f.rule == "LCPP-008"]
    assert bool(found) is refused
    assert verdict.blocked is refused


def test_the_services_step_adds_no_second_copy_of_a_finding() -> None:
    verdict = judged({**MAIN, "flash_attn": "off", "extra_args": ["-ctv", "q4_0"]})
    assert len(found_rules(verdict, "LCPP-008")) == 1


# --- model files ----------------------------------------------------------------------------


def test_missing_files_are_error_findings() -> None:
    extra = ["--mmproj", "/srv/models/mm.gguf", "-md", "/srv/models/draft.gguf"]
    files = {
        "/srv/models/m.gguf": False,
        "/srv/models/mm.gguf": True,
        "/srv/models/draft.gguf": False,
    }
    verdict = judged({**MAIN, "extra_args": extra}, found=ServiceFacts(files=files))
    missing = [f for f in verdict.findings if f.rule == "LCPP-011"]
    assert [f.severity for f in missing] == ["error", "error"]
    assert sorted(f.message.split(": llama-server")[0] for f in missing) == [
        "profile main: draft model /srv/models/draft.gguf not found on box",
        "profile main: model /srv/models/m.gguf not found on box",
    ]
    assert verdict.blocked and verdict.problems == []  # `apply --force` may deploy anyway


def test_the_model_extra_args_name_is_the_one_checked() -> None:
    files = {"/srv/models/m.gguf": False, "/srv/models/other.gguf": True}
    extra = ["-m", "/srv/models/other.gguf"]
    verdict = judged({**MAIN, "extra_args": extra}, found=ServiceFacts(files=files))
    assert not found_rules(verdict, "LCPP-011")


def test_files_not_read_are_not_missing() -> None:
    verdict = judged(MAIN, found=ServiceFacts(files={"/srv/models/m.gguf": None}))
    assert not found_rules(verdict, "LCPP-011")


# --- the build that will run them -----------------------------------------------------------


def test_an_argument_the_planned_build_refuses_is_an_error() -> None:
    found = ServiceFacts(binary=binary(NEW, version=Version("10991", "930e2fa59")))
    verdict = judged({**MAIN, "extra_args": ["--mlock", "--ctx-size=8192"]}, found=found)
    errors = [f for f in verdict.findings if f.rule == "LCPP-009"]
    assert [f.severity for f in errors] == ["error", "error"]
    assert [f.message.split(": the unit")[0] for f in errors] == [
        "profile main: llama-server b10991 (930e2fa59) does not accept --ctx-size=8192 (llama.cpp"
        " takes the value as the next argument: --ctx-size 8192)",
        "profile main: llama-server b10991 (930e2fa59) does not accept --mlock",
    ]
    assert verdict.blocked


def test_an_argument_the_running_build_refuses_is_a_warning() -> None:
    found = ServiceFacts(binary=binary(NEW, planned=False))
    verdict = judged({**MAIN, "extra_args": ["--no-mmap"]}, found=found)
    (warning,) = [f for f in verdict.findings if f.rule == "LCPP-010"]
    assert warning.severity == "warning"
    assert warning.message.startswith(
        f"profile main: llama-server at {PATH} (the build running now; the planned one is not"
        " built yet) does not accept --no-mmap."
    )
    assert not found_rules(verdict, "LCPP-009")


@pytest.mark.parametrize("options", [NEW, OLD], ids=["load-mode", "mlock"])
def test_what_the_role_writes_is_accepted_by_both_builds(options: Options) -> None:
    full = {**MAIN, "mlock": True, "gpu_layers": "all", "threads": 8, "flash_attn": "on"}
    verdict = judged(full, found=ServiceFacts(binary=binary(options)))
    assert not found_rules(verdict, "LCPP-009")


def test_mlock_on_a_build_without_a_mlock_option() -> None:
    """The first --load-mode builds had no mmap+mlock (llama.cpp#26110): the new help less it."""
    text = (RECORDED / "help_llama-cpp-python-0.3.36.txt").read_text()
    first = parse_help(text.replace("mmap+mlock", "mmap"))
    found = ServiceFacts(binary=binary(first, version=Version("10114", "ed7adbfef")))
    (message,) = found_rules(judged({**MAIN, "mlock": True}, found=found), "LCPP-009")
    assert message.startswith(
        "profile main sets mlock: true, but llama-server b10114 (ed7adbfef) has no mlock option"
    )
    assert not found_rules(judged({**MAIN, "mlock": False}, found=found), "LCPP-009")


def test_no_build_read_no_finding() -> None:
    verdict = judged({**MAIN, "extra_args": ["--mlock"]})
    assert not found_rules(verdict, "LCPP-009") and not found_rules(verdict, "LCPP-010")


# --- read on the host -----------------------------------------------------------------------


def stand_in(folder: Path, help_name: str, version_name: str) -> None:
    """An executable `llama-server` printing recorded output, as a build would."""
    folder.mkdir(parents=True)
    script = folder / "llama-server"
    script.write_text(
        "#!/bin/sh\n"
        f'case "$1" in --version) cat {RECORDED / version_name} >&2 ;;'
        f" --help) cat {RECORDED / help_name} ;; *) exit 1 ;; esac\n"
    )
    script.chmod(0o755)


def read_on_host(s: stack.Stack, build: str) -> ServiceFacts:
    script = servicefacts.script(s, "", build)
    out = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, check=True)
    return servicefacts.parse(s, "", out.stdout, build)


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A llama.cpp prefix with a current build (the older options) and a model file."""
    prefix = tmp_path / "llama.cpp"
    stand_in(
        prefix / "builds" / "old" / "bin",
        "help_b6784_genai-electron.txt",
        "version_b4621_llama-cpp-11681.txt",
    )
    (prefix / "builds" / "old" / ".complete").touch()
    (prefix / "current").symlink_to("builds/old")
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    return tmp_path


def host_stack(host: Path, **profile: Any) -> stack.Stack:
    data = {
        "llama_cpp_prefix": str(host / "llama.cpp"),
        "llama_server_profiles": [{**MAIN, "model": str(host / "m.gguf"), **profile}],
    }
    return stack.from_data(data)


def test_the_planned_build_is_read_once_it_is_built(host: Path) -> None:
    s = host_stack(host, extra_args=["-md", str(host / "draft.gguf"), "--mlock"])
    found = read_on_host(s, "new")
    assert found.binary is not None and not found.binary.planned  # not built yet: current
    assert found.binary.path == str(host / "llama.cpp" / "builds" / "old" / "bin" / "llama-server")
    assert (found.binary.label, found.binary.options) == ("b4621 (6eecde3c)", OLD)
    assert found.files == {str(host / "m.gguf"): True, str(host / "draft.gguf"): False}
    new = host / "llama.cpp" / "builds" / "new"
    stand_in(new / "bin", "help_llama-cpp-python-0.3.36.txt", "version_llama-cpp-python-0.3.36.txt")
    assert read_on_host(s, "new").binary == ServerBinary(
        str(host / "llama.cpp" / "builds" / "old" / "bin" / "llama-server"),
        False,
        Version("4621", "6eecde3c"),
        OLD,
    )  # no .complete yet: a build still running or failed is not the planned one
    (new / ".complete").touch()
    planned = read_on_host(s, "new").binary
    assert planned == ServerBinary(str(new / "bin" / "llama-server"), True, Version(), NEW)
    assert planned.label == f"at {new / 'bin' / 'llama-server'}"


def test_nothing_built_yet(tmp_path: Path) -> None:
    data = {"llama_cpp_prefix": str(tmp_path / "none"), "llama_server_profiles": [MAIN]}
    found = read_on_host(stack.from_data(data), "new")
    assert found.binary is None
    assert found.files == {"/srv/models/m.gguf": False}


def test_the_gate_end_to_end_on_what_the_host_printed(host: Path) -> None:
    s = host_stack(host, extra_args=["--mlock"])
    verdict = gate.judge("box", facts(), s)
    gate.judge_services(verdict, s, read_on_host(s, "new"))
    assert found_rules(verdict, "LCPP-010") == []  # the current build has --mlock
    stand_in(
        host / "llama.cpp" / "builds" / "new" / "bin",
        "help_llama-cpp-python-0.3.36.txt",
        "version_b10991_llama-cpp-28971.txt",
    )
    (host / "llama.cpp" / "builds" / "new" / ".complete").touch()
    verdict = gate.judge("box", facts(), s)
    gate.judge_services(verdict, s, read_on_host(s, "new"))
    (message,) = found_rules(verdict, "LCPP-009")
    assert message.startswith(
        "profile main: llama-server b10991 (930e2fa59) does not accept --mlock"
    )


# --- VRAM -----------------------------------------------------------------------------------


def test_the_budget_counts_a_ctx_size_from_extra_args(tmp_path: Path) -> None:
    model = tiny_gguf.write(tmp_path / "tiny.gguf")
    header = tiny_gguf.header_read_on_a_host(model)
    profile = {**MAIN, "model": str(model), "ctx_size": 512, "extra_args": ["-c", "65536"]}
    verdict = judged(profile, found=ServiceFacts(gguf={str(model): header}))
    assert verdict.budget is not None
    table = "\n".join(verdict.budget.lines())
    assert "(65536 ctx / 1 slots, f16/f16)" in table and "512 ctx" not in table
