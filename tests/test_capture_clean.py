"""capture.clean: the prefixes logs and issue trackers put before pasted lines come off; the text
of the outputs themselves stays as it was."""

from __future__ import annotations

import pytest

from checks.facts import capture

# (pasted line, the line the parsers read); each from a capture in tests/fixtures/corpus/captures/.
STRIPPED = [
    # journald, syslog month (ollama/ollama#9415)
    (
        "Feb 28 12:44:32 ai-server ollama[854770]: initializing"
        " /usr/lib/x86_64-linux-gnu/libcuda.so.570.86.16",
        "initializing /usr/lib/x86_64-linux-gnu/libcuda.so.570.86.16",
    ),
    # journalctl with a localised month (ollama/ollama#9245)
    ("2月 21 13:31:11 tc ollama[285585]: CUDA driver version: 12.3", "CUDA driver version: 12.3"),
    # /var/log/kern.log: syslog, then the kernel's timestamp (MrMEEE/ironhide#97)
    (
        "Oct  3 14:01:56 megatron kernel: [   12.442423] NVRM: loading NVIDIA UNIX x86 Kernel"
        " Module  285.03  Mon Aug 15 02:36:51 PDT 2011",
        "NVRM: loading NVIDIA UNIX x86 Kernel Module  285.03  Mon Aug 15 02:36:51 PDT 2011",
    ),
    # journalctl -o short-iso
    (
        "2025-02-28T12:44:31+0000 ai-server ollama[854770]: device count 1",
        "device count 1",
    ),
    # llama-box's elapsed time and level (gpustack/llama-box#14)
    (
        "0.00.125.955 I   Device 0: NVIDIA GeForce RTX 3090, compute capability 8.6, VMM: yes",
        "  Device 0: NVIDIA GeForce RTX 3090, compute capability 8.6, VMM: yes",
    ),
    # HTML pasted into an issue (AlexeyAB/darknet#3334)
    (
        "  <b>CUDA Capability Major/Minor version number:    5.2</b>",
        "  CUDA Capability Major/Minor version number:    5.2",
    ),
    # XML escaped by an e-mail reply to an issue (1Panel-dev/1Panel#11910)
    (
        "&nbsp; &nbsp; &nbsp; &nbsp; <driver_version&gt;591.74</driver_version&gt;",
        "        <driver_version>591.74</driver_version>",
    ),
]

STRIPPED += [
    # `docker logs -t` / `kubectl logs --timestamps`: RFC 3339 in UTC with nanoseconds
    ("2025-11-23T20:22:01.123456789Z Driver Version: 580.95.05", "Driver Version: 580.95.05"),
    # a bracketed timestamp
    ("[2025-11-23 20:22:01] CUDA driver version: 12.3", "CUDA driver version: 12.3"),
    # Python logging's "%(asctime)s - %(name)s - %(levelname)s - " (chatdoc-com/OCRFlux#70)
    (
        "2025-08-13 04:39:39,465 - __main__ - INFO - NVIDIA GeForce RTX 5090 with CUDA"
        " capability sm_120 is not compatible with the current PyTorch installation.",
        "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current"
        " PyTorch installation.",
    ),
    (
        "2025-08-13 04:39:39,318 - __main__ - INFO - INFO 08-13 04:39:39 cuda.py:229] Using"
        " Flash Attention backend.",
        "INFO 08-13 04:39:39 cuda.py:229] Using Flash Attention backend.",
    ),
]

KEPT = [
    "Fri Oct  2 23:54:29 2020",  # nvidia-smi's clock line
    "Sun Dec  4 17:42:13 2022",
    "ggml_cuda_init: found 4 CUDA devices:",
    "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-513536b6-7d19-9063-b049-1e69664bb298)",
    "llama_model_loader: - kv   0:    general.architecture str    = qwen2",
    'time=2025-05-05T16:11:49.762-07:00 level=INFO source=gpu.go:319 msg="detected OS VRAM"',
    "-- The CUDA compiler identification is NVIDIA 11.3.109",
    "<nvidia_smi_log>",
    "| NVIDIA-SMI 591.59                 Driver Version: 591.59         CUDA Version: 13.1     |",
    "AT&T and &c stay as typed",
    # a message that only looks like Python logging's prefix: no milliseconds, no level
    "2025-08-13 04:39:39 - __main__ - INFO - started",
    "2025-08-13 04:39:39,465 - __main__ - NOTE - started",
]


@pytest.mark.parametrize(("pasted", "read"), STRIPPED)
def test_log_prefixes_come_off(pasted: str, read: str) -> None:
    assert capture.clean(pasted + "\n") == read + "\n"


@pytest.mark.parametrize("line", KEPT)
def test_output_lines_stay(line: str) -> None:
    assert capture.clean(line + "\n") == line + "\n"


def test_prefixed_output_reads_like_the_bare_output() -> None:
    bare = (
        "ggml_cuda_init: found 1 CUDA devices:\n  Device 0: Quadro GP100, compute capability 6.0\n"
    )
    prefixed = "".join(
        f"Jan  1 20:22:43 host llama-server[911]: {line}\n" for line in bare.splitlines()
    )
    assert capture.recognise(capture.clean(prefixed)) == capture.recognise(bare)


def test_escaped_xml_reads_like_the_xml() -> None:
    """The e-mail-escaped capture gives what the same XML unescaped gives."""
    xml = (
        '<?xml version="1.0" ?>\n<nvidia_smi_log>\n\t<driver_version>591.74</driver_version>\n'
        '\t<cuda_version>13.1</cuda_version>\n\t<gpu id="00000000:01:00.0">\n'
        "\t\t<product_name>NVIDIA GeForce RTX 4090</product_name>\n"
    )
    escaped = xml.replace(">", "&gt;").replace("\t", "&nbsp; &nbsp; ")
    facts, seen = capture.recognise(capture.clean(escaped))
    assert seen == capture.recognise(capture.clean(xml))[1]
    assert (facts.driver.version, facts.driver.cuda_version) == ("591.74", "13.1")
    assert [g.name for g in facts.gpus] == ["NVIDIA GeForce RTX 4090"]


def test_compose_prefixes_come_off_only_where_a_service_runs() -> None:
    """docker compose's "service-1  | " goes when it prefixes three lines in a row; a line of a
    table with a word before "| " stays."""
    lines = ["ggml_cuda_init: found 1 CUDA devices:", "  Device 0: NVIDIA GeForce RTX 5090", "ok"]
    pasted = "".join(f"ollama-1  | {line}\n" for line in lines)
    assert capture.clean(pasted) == "".join(f"{line}\n" for line in lines)
    table = "Name    | Value\nDriver  | 580.95.05\n"
    assert capture.clean(table) == table


def test_an_indented_block_starts_at_the_margin_and_nesting_stays() -> None:
    """A block indented as a markdown code block loses its shared indent; lines indented under a
    header (`nvidia-smi -q`, Warp's banner) keep theirs."""
    block = "Output:\n\n    GPU 00000000:01:00.0\n        Product Name : Tesla T4\n"
    assert capture.clean(block) == "Output:\n\nGPU 00000000:01:00.0\n    Product Name : Tesla T4\n"
    nested = "GPU 00000000:01:00.0\n    Product Name : Tesla T4\n    Product Brand : NVIDIA\n"
    assert capture.clean(nested) == nested


def test_each_host_s_own_prefixes_come_off_under_pdsh_s() -> None:
    """pdsh before journald: the journald prefix under "node01: " goes as well."""
    bare = (
        "ggml_cuda_init: GGML_CUDA_FORCE_MMQ:    no\n"
        "ggml_cuda_init: found 1 CUDA devices:\n"
        "  Device 0: Quadro GP100, compute capability 6.0\n"
    )
    pasted = "".join(
        f"node01: Jan  1 20:22:43 host llama-server[911]: {line}\n" for line in bare.splitlines()
    )
    facts = capture.parse(capture.Capture("pasted", pasted))
    assert [g.name for g in facts.gpus] == ["Quadro GP100"]


def test_quote_marks_inside_an_indented_block_come_off_with_its_indent() -> None:
    """A paste whose command line is quoted ('>python -m sglang.check_env', sgl-project/sglang
    PR 11052), then indented as a whole: the block loses its indent and the quote mark, so its
    lines read as they do unindented."""
    pasted = "Script output on H20\n>python -m sglang.check_env\nCUDA Driver Version: 550.127.08\n"
    indented = "".join("    " + line for line in pasted.splitlines(keepends=True))
    assert capture.clean(indented) == capture.clean(pasted)
    assert "CUDA Driver Version: 550.127.08" in capture.clean(indented).split("\n")
