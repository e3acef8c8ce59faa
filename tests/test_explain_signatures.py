"""Log signatures against realistic excerpts, the real crash logs, and pathological input.

tests/fixtures/signatures/<signature-id>/ holds `match*.log` files (the signature must hit) and
`near*.log` files (near-misses it must not hit); SOURCES.tsv there says where each came from.
"""

from __future__ import annotations

import csv
import functools
import io
import random
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import pytest

from checks.facts.model import HostFacts, from_dict
from checks.logs import explain, logscan

FIXTURES = Path(__file__).parent / "fixtures"
SIGNATURE_CASES = FIXTURES / "signatures"
REAL = FIXTURES / "real"

# Realistic logs that a signature gets wrong today. Each is a strict xfail: fixing the signature
# makes the test pass, and the entry must then be removed.
KNOWN_GAPS: dict[str, str] = {}


def _cases(prefix: str) -> list[object]:
    params: list[object] = []
    for path in sorted(SIGNATURE_CASES.glob(f"*/{prefix}*.log")):
        key = f"{path.parent.name}/{path.name}"
        marks = (
            [pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[key])] if key in KNOWN_GAPS else []
        )
        params.append(pytest.param(path.parent.name, path, id=key, marks=marks))
    return params


def _scan(path: Path) -> logscan.Scan:
    with path.open("rb") as stream:
        return logscan.scan(stream)


def _scan_bytes(data: bytes) -> logscan.Scan:
    return logscan.scan(io.BytesIO(data))


# ---------------------------------------------------------------------------------------------
# Every signature has fixtures, and each fixture hits (or misses) as its name says.


@pytest.mark.parametrize("signature", logscan.signatures(), ids=lambda s: s.id)
def test_every_signature_has_match_and_near_files(signature: logscan.Signature) -> None:
    folder = SIGNATURE_CASES / signature.id
    assert sorted(folder.glob("match*.log")), f"no match*.log for {signature.id}"
    assert sorted(folder.glob("near*.log")), f"no near*.log for {signature.id}"


def test_fixture_folders_name_known_signatures() -> None:
    known = {s.id for s in logscan.signatures()}
    folders = {p.name for p in SIGNATURE_CASES.iterdir() if p.is_dir()}
    assert folders == known


def test_sources_list_every_fixture() -> None:
    with (SIGNATURE_CASES / "SOURCES.tsv").open(newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    listed = {row["file"] for row in rows}
    on_disk = {f"{p.parent.name}/{p.name}" for p in SIGNATURE_CASES.glob("*/*.log")}
    assert listed == on_disk
    for row in rows:
        # a public thread, a constructed case, or output recorded on a machine the row names
        assert row["source"].startswith(("constructed", "https://", "recorded on ")), row


@pytest.mark.parametrize(("signature_id", "path"), _cases("match"))
def test_match_file_hits(signature_id: str, path: Path) -> None:
    hit = _scan(path).hits.get(signature_id)
    assert hit is not None, f"{signature_id} did not hit {path.name}"
    assert hit.count >= 1
    assert 1 <= len(hit.evidence) <= logscan.EVIDENCE


@pytest.mark.parametrize(("signature_id", "path"), _cases("near"))
def test_near_file_does_not_hit(signature_id: str, path: Path) -> None:
    hits = _scan(path).hits
    assert signature_id not in hits, hits[signature_id].evidence if signature_id in hits else ""


# Signatures whose near misses are neighbouring kernel or loader messages that may hold no anchor
# (NVRM naming vfio-pci): their patterns alone must refuse every near line, prefilter or not.
PATTERN_NEAR = (
    "nova-core-bound",
    "open-module-no-gsp",
    "open-module-unsupported-gpu",
    "wsl-libcuda-not-symlink",
    "uvm-hmm-init-failure",
)


@pytest.mark.parametrize("signature_id", PATTERN_NEAR)
def test_near_lines_miss_the_pattern_itself(signature_id: str) -> None:
    sig = next(s for s in logscan.signatures() if s.id == signature_id)
    paths = sorted((SIGNATURE_CASES / signature_id).glob("near*.log"))
    lines = [logscan.clean(raw) for p in paths for raw in p.read_text().splitlines()]
    assert paths and lines
    assert [line for line in lines if sig.pattern.search(line)] == []


def test_fixture_set_covers_pasted_log_shapes() -> None:
    """Colour codes, CRLF, markdown fences with quote marks, and a non-UTF-8 byte all occur."""
    blobs = [p.read_bytes() for p in SIGNATURE_CASES.glob("*/*.log")]
    assert any(b"\x1b[" in blob for blob in blobs)
    assert any(b"\r\n" in blob for blob in blobs)
    assert any(b"\n> ```" in blob or blob.startswith(b"> ```") for blob in blobs)

    def not_utf8(blob: bytes) -> bool:
        try:
            blob.decode("utf-8")
        except UnicodeDecodeError:
            return True
        return False

    assert any(not_utf8(blob) for blob in blobs)


# ---------------------------------------------------------------------------------------------
# The real crash logs: the top diagnosis per file, as MANIFEST.tsv describes it.

# file -> (rule, substrings the message must contain, substrings the fix must contain)
REAL_EXPECTED: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "err804__vllm-4940_docker-run.txt": ("CTR-002", ("804",), ("driver",)),
    "err804_ggml__llamacpp-3247_rtx3090-525.txt": ("CTR-002", ("525.105.17",), ("12.0",)),
    "err_containercli_cuda12.8__tabbyapi-324.txt": ("CTR-001", ("12.8",), ("570.26", "CUDA 12.4")),
    "err_couldnotselect__xagent-273_4x4090.txt": ("CTR-004", (), ("nvidia-container-toolkit",)),
    "err_cudagraph-oom__vllm-19186_capture-end.txt": (
        "VLLM-003",
        (),
        ("--gpu-memory-utilization",),
    ),
    "err_nokernel_vllm__vllm-18995_rtx5090-docker.txt": ("ARCH-004", (), ()),
    "err_nvml-mismatch__tinygrad-ogkm-47.txt": ("DRV-003", (), ("Reboot",)),
    "err_nvsmi-failed_secureboot__nvautoinstall-75_rtx2060s.txt": ("DRV-006", (), ("Secure Boot",)),
    "err_sm120_collect-env__pytorch-150733_rtx5090D.txt": (
        "ARCH-001",
        ("RTX 5090 D", "sm_120"),
        ("cu128",),
    ),
    "err_turboquant-hybrid__vllm-40124_qwen36-35b-a3b.txt": ("VLLM-001", (), ("fp8",)),
    "err_workspace-locked__vllm-pr48179_moe-modular-kernel.txt": (
        "VLLM-002",
        ("modular_kernel",),
        (),
    ),
}


def _manifest() -> dict[str, str]:
    with (REAL / "MANIFEST.tsv").open(newline="") as handle:
        return {
            row["file"]: row["expected_diagnosis"] for row in csv.DictReader(handle, delimiter="\t")
        }


def test_real_expectations_cover_every_error_log() -> None:
    error_logs = {p.name for p in REAL.glob("err*.txt")}
    assert set(REAL_EXPECTED) == error_logs
    manifest = _manifest()
    for name in error_logs:
        assert manifest.get(name, "-") != "-", f"{name}: MANIFEST.tsv gives no expected diagnosis"


@pytest.mark.parametrize("name", sorted(REAL_EXPECTED))
def test_real_error_log_top_diagnosis(name: str) -> None:
    rule, in_message, in_fix = REAL_EXPECTED[name]
    diagnoses = explain.diagnose(_scan(REAL / name))
    assert diagnoses, f"{name}: no diagnosis"
    top = diagnoses[0]
    assert top.rule == rule, (top.rule, top.signature, top.message)
    for text in in_message:
        assert text in top.message, (text, top.message)
    for text in in_fix:
        assert text in top.fix, (text, top.fix)
    assert top.evidence and top.count >= 1
    assert "{" not in top.message + top.fix, "unfilled placeholder"


@pytest.mark.parametrize(
    "path",
    sorted(p for p in REAL.iterdir() if not p.name.startswith("err") and p.name != "MANIFEST.tsv"),
    ids=lambda p: p.name,
)
def test_real_non_error_capture_gives_no_diagnosis(path: Path) -> None:
    assert explain.diagnose(_scan(path)) == []


# ---------------------------------------------------------------------------------------------
# Facts change the advice.

ERROR_804 = (
    "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions "
    "before calling NumCudaDevices() that might have already set an error? Error 804: forward "
    "compatibility was attempted on non supported HW"
)


@pytest.mark.parametrize(
    "image",
    [
        "nvidia/cuda:12.4.1-runtime-ubuntu22.04",
        "pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime",
    ],
)
def test_804_on_geforce_with_old_driver_names_both_ways_out(image: str) -> None:
    log = "\n".join(
        [
            f'$ docker run --rm --gpus all {image} python3 -c "import torch; torch.cuda.init()"',
            "Traceback (most recent call last):",
            '  File "<string>", line 1, in <module>',
            ERROR_804,
            "",
        ]
    ).encode()
    host = from_dict(
        HostFacts,
        {
            "gpus": [{"index": 0, "name": "NVIDIA GeForce RTX 4090"}],
            "driver": {"version": "535.183.01"},
        },
    )
    top = explain.diagnose(_scan_bytes(log), host=host)[0]
    assert top.rule == "CTR-002"
    assert "consumer GPU" in top.message and "12.4" in top.message
    assert "Upgrade the driver to >= 550.54.14" in top.fix
    assert "image built on CUDA <= 12.2" in top.fix


@pytest.mark.parametrize(
    ("require", "host_driver", "minimum"),
    [("13.0", "570.124.06", "580.65.06"), ("12.9", None, "575.51.03")],
)
def test_driver_minimum_is_shown_as_the_table_writes_it(
    require: str, host_driver: str | None, minimum: str
) -> None:
    """tables/cuda.toml writes 580.65.06 and 575.51.03; the fix says exactly that."""
    log = (
        "nvidia-container-cli: requirement error: unsatisfied condition: "
        f"cuda>={require}, please update your driver to a newer version\n"
    ).encode()
    host = from_dict(HostFacts, {"driver": {"version": host_driver}})
    top = explain.diagnose(_scan_bytes(log), host=host)[0]
    assert top.rule == "CTR-001"
    assert f"Upgrade the driver to >= {minimum}," in top.fix


SUPPORTED = (
    "dict_keys(['AquilaModel', 'LlamaForCausalLM', 'MistralForCausalLM', 'Qwen2ForCausalLM', "
    "'Qwen2VLForConditionalGeneration'])"
)


def test_architecture_in_supported_list_points_at_the_import_error() -> None:
    scan = _scan(SIGNATURE_CASES / "architecture-not-supported" / "match_in_list_import_error.log")
    top = explain.diagnose(scan)[0]
    assert top.rule == "VLLM-004"
    assert "failed to import earlier" in top.message
    assert "ImportError" in top.fix and "Upgrade vLLM" not in top.fix


def test_architecture_not_in_supported_list_says_upgrade() -> None:
    scan = _scan(SIGNATURE_CASES / "architecture-not-supported" / "match_not_in_list.log")
    top = explain.diagnose(scan)[0]
    assert top.rule == "VLLM-004"
    assert (
        "Glm4MoeForCausalLM" in top.message and "not in this vLLM's supported list" in top.message
    )
    assert top.fix.startswith("Upgrade vLLM")


@pytest.mark.parametrize(
    ("arch", "in_list"), [("Qwen2ForCausalLM", True), ("DeepseekV3ForCausalLM", False)]
)
def test_architecture_variant_follows_the_printed_list(arch: str, in_list: bool) -> None:
    line = (
        f"ValueError: Model architectures ['{arch}'] are not supported for now. "
        f"Supported architectures: {SUPPORTED}\n"
    )
    top = explain.diagnose(_scan_bytes(line.encode()))[0]
    assert ("failed to import earlier" in top.message) is in_list
    assert top.fix.startswith("Upgrade vLLM") is (not in_list)


# ---------------------------------------------------------------------------------------------
# Robustness: nothing makes the scanner raise.


def _scan_both(data: bytes, tmp_path: Path) -> logscan.Scan:
    """Scan `data` through bytes.find and through a real file (grep where present); same hits."""
    python = _scan_bytes(data)
    path = tmp_path / "input.log"
    path.write_bytes(data)
    assert _summary(_scan(path)) == _summary(python)
    return python


def test_random_bytes(tmp_path: Path) -> None:
    rng = random.Random(804)
    noise = rng.randbytes(1 << 20)
    # Anchors buried in noise make the candidate and decoding paths run on garbage too.
    salts = [b"rror 804", b"\x1b[31m", b"out of memory\r", b"\xff\xfe", b"\x00Capture"]
    salted = b"".join(noise[i : i + 4096] + rng.choice(salts) for i in range(0, len(noise), 4096))
    for data in (noise, salted):
        scan = _scan_both(data, tmp_path)
        assert scan.bytes == len(data)


def test_single_5mb_line_without_newline(tmp_path: Path) -> None:
    data = b"A" * (5 << 20) + b" Error 804: forward compatibility was attempted on non supported HW"
    scan = _scan_both(data, tmp_path)
    assert scan.lines == 1
    assert scan.bytes == len(data)


def test_empty_stream(tmp_path: Path) -> None:
    scan = _scan_both(b"", tmp_path)
    assert scan.hits == {} and scan.lines == 0 and scan.bytes == 0 and scan.fact_text == []


def test_only_crlf(tmp_path: Path) -> None:
    scan = _scan_both(b"\r\n", tmp_path)
    assert scan.hits == {} and scan.lines == 1
    assert explain.diagnose(scan) == []


ALL_FIXTURES = sorted(p for p in FIXTURES.rglob("*") if p.is_file())
LOG_FIXTURES = sorted([*SIGNATURE_CASES.glob("*/*.log"), *REAL.glob("*.txt")])


def _summary(scan: logscan.Scan) -> dict[str, tuple[list[tuple[int, str]], int]]:
    return {sig: (hit.evidence, hit.count) for sig, hit in scan.hits.items()}


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_fixture_file_scans_and_diagnoses(path: Path) -> None:
    with path.open("rb") as stream:
        python = logscan.scan(stream, use_grep=False)
    assert python.bytes == path.stat().st_size
    assert python.lines == path.read_bytes().count(b"\n") + (
        0 if path.read_bytes().endswith(b"\n") or not path.stat().st_size else 1
    )
    explain.diagnose(python)
    # The grep prefilter (used for real files when GNU grep exists) finds the same lines.
    default = _scan(path)
    assert _summary(default) == _summary(python)
    assert default.fact_text == python.fact_text
    explain.diagnose(default)


@pytest.mark.parametrize("path", LOG_FIXTURES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_diagnoses_show_driver_versions_as_written(path: Path) -> None:
    """NVIDIA writes 580.65.06: a driver with a one-digit third component was printed from its
    parsed form; and no unknown value reads None."""
    for diagnosis in explain.diagnose(_scan(path)):
        for text in (diagnosis.message, diagnosis.fix):
            assert not re.search(r"\b\d{3}\.\d{1,3}\.\d\b", text), text
            assert not re.search(r"\bNone\b", text), text


# ---------------------------------------------------------------------------------------------
# Line numbers, also across chunk boundaries.


def _small_chunks(size: int) -> Callable[..., Iterator[bytes]]:
    original = logscan.chunks

    @functools.wraps(original)
    def chunks(stream: BinaryIO, size_: int = size) -> Iterator[bytes]:
        return original(stream, size_)

    return chunks


# (line number, text, signature) - every line here is shorter than 64 bytes.
PLANTED = [
    (7, "Failed to initialize NVML: Driver/library version mismatch", "nvml-mismatch"),
    (23, "Error: unknown or invalid runtime name: nvidia.", "unknown-runtime-nvidia"),
    (24, "CUDA error 804 at ggml-cuda.cu:5522", "forward-compat-804"),
    (61, "    self.cuda_graph.capture_end()", None),
    (62, "RuntimeError: CUDA error: out of memory", "cuda-graph-capture-oom"),
    # The same line is the plain OOM too, which graph capture explains (and outranks).
    (62, "RuntimeError: CUDA error: out of memory", "cuda-oom"),
    (118, "insmod: nvidia.ko: Required key not available", "module-key-rejected"),
    (119, "Failed to initialize NVML: Driver/library version mismatch", "nvml-mismatch"),
]


def _planted_log(newline: str) -> bytes:
    lines = [f"INFO step {n:05d} ok" for n in range(1, 141)]
    for number, text, _ in PLANTED:
        lines[number - 1] = text
    return (newline.join(lines) + newline).encode()


def _expected_evidence() -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for number, _, signature in PLANTED:
        if signature is not None:
            out.setdefault(signature, []).append(number)
    return out


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
@pytest.mark.parametrize("chunk", [None, 64, 100, 257])
def test_line_numbers_survive_chunk_boundaries(
    newline: str, chunk: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _planted_log(newline)
    assert max(len(line) for line in data.split(b"\n")) < 64
    if chunk is not None:
        # `chunks` binds CHUNK as its default at import, so patching CHUNK alone changes nothing.
        monkeypatch.setattr(logscan, "CHUNK", chunk)
        monkeypatch.setattr(logscan, "chunks", _small_chunks(chunk))
    scan = _scan_bytes(data)
    found = {sig: [n for n, _ in hit.evidence] for sig, hit in scan.hits.items()}
    assert found == _expected_evidence()
    assert scan.lines == 140
    assert scan.hits["nvml-mismatch"].count == 2
    assert scan.hits["nvml-mismatch"].evidence[0][1] == PLANTED[0][1]


def test_line_numbers_after_a_line_longer_than_the_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logscan, "chunks", _small_chunks(64))
    data = b"x" * 200 + b"\nFailed to initialize NVML: Driver/library version mismatch\n"
    scan = _scan_bytes(data)
    assert scan.hits["nvml-mismatch"].evidence[0][0] == 2
    assert scan.lines == 2


# ---------------------------------------------------------------------------------------------
# Constant memory on a large log.


@pytest.mark.parametrize("use_grep", [False, True], ids=["find", "grep"])
def test_50mb_log_keeps_bounded_state(tmp_path: Path, use_grep: bool) -> None:
    path = tmp_path / "big.log"
    block_lines = [
        f"(VllmWorker rank=0 pid=4242) INFO 06-05 06:18:{n % 60:02d} [worker.py:{n}] "
        f"step {n} tokens={n * 7} latency_ms={n % 97}.{n % 10}"
        for n in range(100)
    ]
    # Fact lines (they carry FACT_ANCHORS) fill the bounded fact buffer many times over.
    block_lines[25] = (
        "| NVIDIA-SMI 550.144.03    Driver Version: 550.144.03    CUDA Version: 12.4 |"
    )
    block_lines[75] = "GPU models and configuration: GPU 0: NVIDIA GeForce RTX 4090"
    block = ("\n".join(block_lines) + "\n").encode()
    signature_line = (
        b"RuntimeError: Unexpected error ... Error 804: forward compatibility was attempted\n"
    )
    target = 50 << 20
    planted = written = blocks = 0
    with path.open("wb") as out:
        while written < target:
            out.write(block)
            written += len(block)
            blocks += 1
            if blocks % 97 == 0:
                out.write(signature_line)
                written += len(signature_line)
                planted += 1
    assert planted > logscan.EVIDENCE

    with path.open("rb") as stream:
        scan = logscan.scan(stream, use_grep=use_grep)

    if not use_grep:
        assert scan.bytes == path.stat().st_size
        assert scan.lines == blocks * len(block_lines) + planted
    hit = scan.hits["forward-compat-804"]
    assert hit.count == planted
    assert len(hit.evidence) == logscan.EVIDENCE
    assert [n for n, _ in hit.evidence] == [97 * 100 * k + k for k in (1, 2, 3)]
    assert set(scan.hits) == {"forward-compat-804"}
    kept = sum(len(text) for text in scan.fact_text)
    assert kept <= logscan.MAX_FACT_BYTES + logscan.MAX_LINE
    # Two fact lines per block were written; the buffer stopped well before the end.
    assert len(scan.fact_text) < blocks


@pytest.mark.parametrize(
    ("raw", "cleaned"),
    [
        ("Nov 23 20:22:01 gpubox ollama[911]: -> initialization error", "-> initialization error"),
        ("Nov 23 20:22:01 gpubox kernel: NVRM: API mismatch", "NVRM: API mismatch"),
        ("2025-11-23T20:22:01+0000 gpubox vllm[911]: symbol: _ZN3c10", "symbol: _ZN3c10"),
        ("vllm-1  | symbol: _ZN3c10", "symbol: _ZN3c10"),
        ("node01: -> initialization error", "-> initialization error"),
        ("nvidia0: probe of 0000:01:00.0 failed", "nvidia0: probe of 0000:01:00.0 failed"),
        ("GPU0: CUDA error: out of memory", "GPU0: CUDA error: out of memory"),
        ("RuntimeError: CUDA error: out of memory", "RuntimeError: CUDA error: out of memory"),
    ],
)
def test_clean_takes_collector_prefixes_off(raw: str, cleaned: str) -> None:
    assert logscan.clean(raw) == cleaned
