"""Every parser of pasted or probed text takes time linear in its input.

A pattern with adjacent quantifiers over overlapping classes (`(.*?)\\s*$`, `\\s+(.*?)\\s+`)
backtracks quadratically or worse on a long line that almost matches. Each parser runs on lines
built for those shapes at two sizes, n and 8n; a linear parser's time grows about eightfold, a
quadratic one's 64-fold. The budget is relative (three times the linear growth, plus a small
floor), so a slow machine does not fail it and a super-linear pattern does.

The property tests feed each parser its own real fixture lines spliced with hostile text.
"""

from __future__ import annotations

import io
import json
import statistics
import time
from collections.abc import Callable
from types import ModuleType

import pytest
from hypothesis import given

from checks.facts import capture, image_config, parsers
from checks.facts.model import HostFacts
from checks.facts.parsers import sections
from checks.logs import explain, logscan
from checks.services import llama_server_help, modelconfig, vllm_images
from provision import build, status
from tests.conftest import FIXTURES
from tests.support.hostile import hostile_lines

N = 256
GROWTH = 8
SLACK = 3
FLOOR = 0.002  # seconds: below this, timer noise dominates
REPEAT = 3

Parser = Callable[[str], object]


def _module_parsers(module: ModuleType) -> list[tuple[str, Parser]]:
    """A module's public parse_*/detect_* functions, its formats and its probes' parsers."""
    name = module.__name__.rsplit(".", 1)[-1]
    found: list[tuple[str, Parser]] = []
    for attr in sorted(dir(module)):
        if attr.startswith(("parse_", "detect_")) and callable(getattr(module, attr)):
            found.append((f"{name}.{attr}", getattr(module, attr)))
    for fmt in getattr(module, "FORMATS", []):
        found.append((f"{name}[{fmt.name}].detect", fmt.detect))
        found.append((f"{name}[{fmt.name}].parse", fmt.parse))
    for probe in getattr(module, "PROBES", []):
        found.append((f"{name}[probe {probe.name}]", probe.parse))
    return found


def _scan(text: str) -> object:
    """The explain scanner on `text` as a log, with the fact extraction that follows it."""
    found = logscan.scan(io.BytesIO(text.encode("utf-8", "replace")), use_grep=False)
    return explain.log_facts(found)


def _reference(text: str) -> object:
    """A reference is refused with ImageConfigError (the CLI's exit 2), never another error."""
    try:
        return image_config.parse_reference(text)
    except image_config.ImageConfigError:
        return None


def _all_parsers() -> list[tuple[str, Parser]]:
    found: list[tuple[str, Parser]] = []
    for module in parsers.modules():
        found += _module_parsers(module)
    found += [
        ("sections.split", sections.split),
        ("capture.clean", capture.clean),
        ("capture.recognise", capture.recognise),
        ("logscan.clean", logscan.clean),
        ("explain.scan", _scan),
        ("llama_server_help.parse_help", llama_server_help.parse_help),
        ("llama_server_help.parse_version", llama_server_help.parse_version),
        ("modelconfig.parse", modelconfig.parse),
        ("modelconfig.guess_from_name", modelconfig.guess_from_name),
        ("vllm_images.image_from_inspect", vllm_images.image_from_inspect),
        ("vllm_images.version_of_ref", vllm_images.version_of_ref),
        ("vllm_images.cuda_of_ref", vllm_images.cuda_of_ref),
        ("status.parse", status.parse),
        ("build.prunable", lambda text: build.prunable(text.splitlines(), "b1", 1)),
        ("image_config.parse_reference", _reference),
    ]
    return found


def _distinct(found: list[tuple[str, Parser]]) -> list[tuple[str, Parser]]:
    """Each function once (a module's parse_x is often also its format's and its probe's)."""
    seen: set[int] = set()
    out = []
    for name, parse in found:
        if id(parse) not in seen:
            seen.add(id(parse))
            out.append((name, parse))
    return out


PARSERS = _distinct(_all_parsers())

# Line starts that take a pattern past its literal prefix, so that the filler after them reaches
# the quantifiers: a table row, "key: value", "KEY=value", section markers, version lines.
PREFIXES = (
    "",
    "a",
    "| 0",
    "| 0  NVIDIA A100",
    "|   0  NVIDIA A100 On |",
    "|",
    "Key",
    "Product Name:",
    "    Driver Version",
    "GPU 0: a",
    "GPU 00000000:01:00.0",
    "NAME=",
    "### gpuprov:x a",
    "=== gpuprov:x ===",
    "runtime-hook: x",
    "license:",
    "podman version 1",
    "version: 1.0",
    "ldd (x) 2.3",
    "glibc 2.3",
    "SecureBoot efivar: 1",
    "OS: a",
    "Libc version: glibc-2",
    "Python platform: Linux-a",
    "Is CUDA available: a",
    "nvidia 1 0",
    "NVIDIA-SMI 5",
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  5",
    "CUDA Version: 1",
    "Device 0: a",
    "  Device 0: NVIDIA, compute capability 8.6",
    "system_info: a",
    "torch 2",
    "Name: a",
    "compute_8",
    "/usr/local/cuda/compat/libcuda.so.5",
    "cuda-compat-12-4",
    "Linux h 6.1.0 #1",
    "-hf, --x",
    "  --ctx-size N",
    "version: 1 (abc1234)",
    '<gpu id="0"><mig_devices>',
    '<nvidia_smi_log><gpu id="x">',
    '{"architectures": ["',
    "ERROR 06-05 10:00:00 ",
    "(VllmWorker rank=0 pid=1) ",
    "> ",
    "\x1b[",
    "insmod x.ko",
    "Model architectures [",
)
# What follows the prefix, repeated to the size: runs of one class, and tokens that alternate
# between the classes two adjacent quantifiers share.
FILLERS = (" ", "\t", "a ", " a", ": ", "| ", "1", "1.", "\n", " \n", ">", "x", "GPU 0: ", ".ko")
SUFFIX = "!"


def _text(filler: str, n: int, prefixes: tuple[str, ...] = PREFIXES) -> str:
    """One line per prefix, each followed by about n characters of `filler`."""
    return "\n".join(prefix + filler * max(1, n // len(filler)) + SUFFIX for prefix in prefixes)


def _cost(parse: Parser, text: str, repeat: int = 1) -> float:
    times = []
    for _ in range(repeat):
        start = time.process_time()
        parse(text)
        times.append(time.process_time() - start)
    return statistics.median(times)


def _grows(parse: Parser, filler: str, n: int, prefixes: tuple[str, ...], repeat: int) -> bool:
    small = _cost(parse, _text(filler, n, prefixes), repeat)
    large = _cost(parse, _text(filler, GROWTH * n, prefixes), repeat)
    return large > GROWTH * small * SLACK + FLOOR


def _superlinear(parse: Parser, n: int = N, fillers: tuple[str, ...] = FILLERS) -> list[str]:
    """The (prefix, filler) shapes on which `parse` grows faster than linearly from n to 8n.

    All prefixes go in one text per filler; only a text over budget is measured again (median of
    REPEAT runs, so one scheduler hiccup is not a quadratic pattern) and split to name the lines.
    """
    slow = []
    for filler in fillers:
        if not _grows(parse, filler, n, PREFIXES, 1) or not _grows(
            parse, filler, n, PREFIXES, REPEAT
        ):
            continue
        culprits = [p for p in PREFIXES if _grows(parse, filler, n, (p,), REPEAT)]
        slow += [f"{p!r} + {filler!r} * n" for p in culprits] or [f"all lines + {filler!r} * n"]
    return slow


@pytest.mark.parametrize(("name", "parse"), PARSERS, ids=[name for name, _ in PARSERS])
def test_parser_time_is_linear(name: str, parse: Parser) -> None:
    assert _superlinear(parse) == [], f"{name} grows super-linearly"


def test_explain_context_time_is_linear() -> None:
    context = lambda text: explain.context(HostFacts(), {}, text)  # noqa: E731
    assert _superlinear(context, fillers=("x",)) == []


def test_explain_scan_with_every_signature_is_linear() -> None:
    assert _superlinear(lambda text: _scan(text), fillers=(".ko",)) == []


def test_the_timing_catches_a_quadratic_pattern() -> None:
    import re

    quadratic = re.compile(r"^(\w+)=(.*?)\s*$", re.M)
    assert _superlinear(quadratic.findall)


# --- property tests: each parser on its own real lines with hostile text spliced in -------------


def _fixture_lines(module: str) -> list[str]:
    """Every line of the recorded outputs of one parser module."""
    lines: list[str] = []
    for path in sorted((FIXTURES / "probes" / module).glob("*.json")):
        case = json.loads(path.read_text())
        if "output_file" in case:
            lines += (FIXTURES / case["output_file"]).read_text(errors="replace").splitlines()
        else:
            lines += case.get("output", [])
    for path in sorted((FIXTURES / "captures" / module).glob("*")):
        if path.is_file():
            lines += path.read_text(errors="replace").splitlines()
    return sorted(set(lines))[:2000]


def _check_facts(parse: Parser, text: str) -> None:
    result = parse(text)
    assert isinstance(result, HostFacts), type(result)


def _is_detect(name: str) -> bool:
    """A detector by its name ("mod.detect_x", "mod[format].detect"); a parser of a format named
    for detectron2 is still a parser."""
    last = name.rsplit(".", 1)[-1]
    return last == "detect" or last.startswith("detect_")


def _module_property_test(module: ModuleType) -> Callable[[], None]:
    name = module.__name__.rsplit(".", 1)[-1]
    found = _module_parsers(module)
    funcs = [f for n, f in found if not _is_detect(n)]
    detects = [f for n, f in found if _is_detect(n)]

    @given(hostile_lines(_fixture_lines(name)))
    def run(text: str) -> None:
        for parse in funcs:
            _check_facts(parse, text)
        for detect in detects:
            assert isinstance(detect(text), bool)

    return run


for _module in parsers.modules():
    _name = _module.__name__.rsplit(".", 1)[-1]
    globals()[f"test_property_{_name}_parsers"] = _module_property_test(_module)


def _real_lines(*folders: str) -> list[str]:
    lines: list[str] = []
    for folder in folders:
        for path in sorted((FIXTURES / folder).rglob("*")):
            if path.is_file() and path.suffix in (".txt", ".json", ".xml", ""):
                lines += path.read_text(errors="replace").splitlines()
    return sorted(set(lines))[:4000]


@given(hostile_lines(_real_lines("real", "captures")))
def test_property_capture_recognise(text: str) -> None:
    facts, seen = capture.recognise(capture.clean(text))
    assert isinstance(facts, HostFacts)
    assert all(isinstance(name, str) for name in seen)


@given(hostile_lines(_real_lines("real", "signatures")))
def test_property_explain_scan(text: str) -> None:
    found = logscan.scan(io.BytesIO(text.encode("utf-8", "replace")), use_grep=False)
    assert isinstance(found, logscan.Scan)
    assert isinstance(explain.log_facts(found), HostFacts)
    assert all(isinstance(d, explain.Diagnosis) for d in explain.diagnose(found))


@given(hostile_lines(_real_lines("llama_server")))
def test_property_llama_server_help(text: str) -> None:
    llama_server_help.parse_help(text)
    llama_server_help.parse_version(text)


@given(hostile_lines(_real_lines("modelconfig")))
def test_property_modelconfig(text: str) -> None:
    config = modelconfig.parse(text)
    assert config is None or isinstance(config, modelconfig.ModelConfig)
    guess = modelconfig.guess_from_name(text)
    assert guess is None or isinstance(guess, modelconfig.ModelConfig)
