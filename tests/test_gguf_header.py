"""The streaming GGUF header reader, against files the gguf package writes and reads.

Each case writes a real GGUF file with gguf.GGUFWriter; the expected summary comes from
gguf.GGUFReader (metadata fields, and the sum of its tensors' n_bytes). The remote command runs
through /bin/sh with the python3 on PATH, isolated from site-packages (-I -S).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import struct
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gguf
import gguf.gguf_writer
import numpy as np
import pytest

from checks.services.gguf_header import GGML_TYPES, GgufInfo, parse_remote, remote_command, summary
from tests.support import tiny_gguf

Q = gguf.GGMLQuantizationType


def test_type_table_equals_gguf_package() -> None:
    assert {Q(k): (block, size) for k, (_, block, size) in GGML_TYPES.items()} == (
        gguf.GGML_QUANT_SIZES
    )
    assert {k: name for k, (name, _, _) in GGML_TYPES.items()} == {
        int(t): t.name.lower() for t in gguf.GGML_QUANT_SIZES
    }


# --- model variants, written with the gguf package ------------------------------------------


def _tensor(w: gguf.GGUFWriter, name: str, shape: tuple[int, ...], qtype: Q, seed: int) -> None:
    data = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    if qtype == Q.F32:
        w.add_tensor(name, data)
    elif qtype == Q.F16:
        w.add_tensor(name, data.astype(np.float16))
    else:
        w.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)


def _write(w: gguf.GGUFWriter) -> None:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def quantized_gqa(path: Path) -> None:
    """f16, q8_0 and q4_0 tensors; 8 heads over 2 KV heads; key/value lengths set explicitly."""
    w = gguf.GGUFWriter(str(path), "qwen2")
    w.add_context_length(32768)
    w.add_embedding_length(256)
    w.add_block_count(3)
    w.add_head_count(8)
    w.add_head_count_kv(2)
    w.add_key_length(48)
    w.add_value_length(40)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    w.add_array("tokenizer.ggml.tokens", ["<s>", "</s>", "a b", "é"])
    w.add_array("tokenizer.ggml.scores", [0.0, -1.0, -2.5, -3.0])
    _tensor(w, "token_embd.weight", (4, 256), Q.F16, 1)
    for i in range(3):
        _tensor(w, f"blk.{i}.attn_q.weight", (256, 256), Q.Q8_0, 10 + i)
        _tensor(w, f"blk.{i}.attn_k.weight", (96, 256), Q.Q4_0, 20 + i)
        _tensor(w, f"blk.{i}.ffn_norm.weight", (256,), Q.F32, 30 + i)
    _write(w)


def every_value_type(path: Path) -> None:
    """One key of each GGUF value type, nested arrays, and per-layer KV head counts."""
    w = gguf.GGUFWriter(str(path), "gemma3")
    w.add_block_count(4)
    w.add_embedding_length(128)
    w.add_head_count(4)
    w.add_head_count_kv([1, 2, 2, 1])
    w.add_uint8("x.u8", 200)
    w.add_int8("x.i8", -5)
    w.add_uint16("x.u16", 60000)
    w.add_int16("x.i16", -300)
    w.add_uint32("x.u32", 4_000_000_000)
    w.add_int32("x.i32", -7)
    w.add_float32("x.f32", 1.5)
    w.add_uint64("x.u64", 2**63)
    w.add_int64("x.i64", -(2**40))
    w.add_float64("x.f64", 2.25)
    w.add_bool("x.bool", True)
    w.add_string("x.str", 'it\'s "quoted"\n')
    w.add_array("x.nested", [[1, 2], [3, 4, 5]])
    w.add_key_value("x.u64s", [1, 2, 3], gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.UINT64)
    w.add_array("x.bools", [True, False])
    _tensor(w, "blk.0.attn_k.weight", (32, 128), Q.BF16, 1)
    _write(w)


def gguf_v2(path: Path) -> None:
    """The tiny llama model with version 2 in its header (v2 and v3 share the layout)."""
    old = gguf.gguf_writer.GGUF_VERSION
    gguf.gguf_writer.GGUF_VERSION = 2
    try:
        tiny_gguf.write(path)
    finally:
        gguf.gguf_writer.GGUF_VERSION = old


def big_endian(path: Path) -> None:
    """GGUF v3 allows big-endian files; the gguf writer swaps every field and tensor."""
    w = gguf.GGUFWriter(str(path), "llama", endianess=gguf.GGUFEndian.BIG)
    w.add_block_count(2)
    w.add_context_length(1024)
    w.add_embedding_length(64)
    w.add_head_count(8)
    w.add_array("tokenizer.ggml.tokens", ["a", "b"])
    _tensor(w, "output.weight", (16, 64), Q.F32, 2)
    _tensor(w, "blk.0.attn_v.weight", (8, 64), Q.F16, 3)
    _write(w)


def split_shard(path: Path) -> None:
    """The first file of a model split in three (llama.cpp's gguf-split keys)."""
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(2)
    w.add_uint16("split.no", 0)
    w.add_uint16("split.count", 3)
    w.add_int32("split.tensors.count", 9)
    _tensor(w, "token_embd.weight", (8, 32), Q.F32, 4)
    _write(w)


def hybrid_per_layer(path: Path) -> None:
    """A Nemotron-H-like hybrid: head_count_kv and feed_forward_length per layer (0 marks a
    layer without attention / without MLP), ssm.* sizes, a bool sliding_window_pattern array."""
    w = gguf.GGUFWriter(str(path), "nemotron_h")
    w.add_context_length(8192)
    w.add_embedding_length(64)
    w.add_block_count(4)
    w.add_head_count([0, 8, 0, 0])
    w.add_head_count_kv([0, 2, 0, 0])
    w.add_feed_forward_length([0, 0, 128, 0])
    w.add_key_length(16)
    w.add_value_length(16)
    w.add_sliding_window(512)
    w.add_sliding_window_pattern([True, False, True, True])
    w.add_ssm_conv_kernel(4)
    w.add_ssm_inner_size(128)
    w.add_ssm_state_size(16)
    w.add_ssm_group_count(2)
    w.add_uint32("nemotron_h.attention.kv_lora_rank", 32)
    w.add_array("nemotron_h.rope.dimension_sections", [1.5, 2.5])
    _tensor(w, "token_embd.weight", (300, 64), Q.F16, 1)
    # layer 2's MLP as experts (what --cpu-moe keeps in RAM) and a dense FFN (--n-cpu-ffn)
    _tensor(w, "blk.2.ffn_gate_up_exps.weight", (4, 256, 64), Q.Q8_0, 2)
    _tensor(w, "blk.2.ffn_down_exps.weight", (4, 64, 128), Q.Q8_0, 3)
    _tensor(w, "blk.2.ffn_gate_inp.weight", (4, 64), Q.F32, 4)  # the router stays
    _tensor(w, "blk.3.ffn_down.weight", (64, 128), Q.F16, 5)
    _tensor(w, "blk.3.ffn_down_shexp.weight", (64, 128), Q.F16, 6)  # a shared expert stays
    _write(w)


def no_hyperparameters(path: Path) -> None:
    """An architecture the file names but gives no hyperparameters for, and no tensors."""
    w = gguf.GGUFWriter(str(path), "bert")
    w.add_string("general.name", "empty")
    _write(w)


VARIANTS: dict[str, Callable[[Path], object]] = {
    "tiny_llama": tiny_gguf.write,
    "quantized_gqa": quantized_gqa,
    "every_value_type": every_value_type,
    "gguf_v2": gguf_v2,
    "big_endian": big_endian,
    "split_shard": split_shard,
    "hybrid_per_layer": hybrid_per_layer,
    "no_hyperparameters": no_hyperparameters,
}

# What each variant must give, beyond agreeing with GGUFReader.
EXPECTED: dict[str, dict[str, Any]] = {
    "tiny_llama": {"version": 3, "head_count_kv": 4, "key_length": 16, "value_length": 16},
    "quantized_gqa": {
        "architecture": "qwen2",
        "head_count": 8,
        "head_count_kv": 2,
        "key_length": 48,
        "value_length": 40,
        "file_type": int(gguf.LlamaFileType.MOSTLY_Q8_0),
        "tensor_bytes": 4 * 256 * 2 + 3 * (256 * 256 // 32 * 34 + 96 * 256 // 32 * 18 + 256 * 4),
    },
    "every_value_type": {"head_count_kv": 2, "key_length": 32, "tensor_bytes": 32 * 128 * 2},
    "gguf_v2": {"version": 2, "block_count": 2},
    "big_endian": {"version": 3, "head_count_kv": 8, "key_length": 8, "context_length": 1024},
    "split_shard": {"split_count": 3, "tensor_count": 1},
    "hybrid_per_layer": {
        "head_count": 8,
        "head_count_kv": 2,
        "head_count_kv_layers": (0, 2, 0, 0),
        "feed_forward_layers": (0, 0, 128, 0),
        "sliding_window_layers": (1, 0, 1, 1),
        "sliding_window": 512,
        "ssm_conv_kernel": 4,
        "ssm_inner_size": 128,
        "ssm_state_size": 16,
        "ssm_group_count": 2,
        "kv_lora_rank": 32,
        "vocab_size": 300,
        "tensor_count": 6,
        "tensor_bytes": 300 * 64 * 2 + 4 * 256 * 68 + 4 * 64 * 136 + 4 * 64 * 4 + 2 * 64 * 128 * 2,
        "expert_bytes_layers": (0, 0, 4 * 256 * 68 + 4 * 64 * 136, 0),
        "ffn_bytes_layers": (0, 0, 0, 64 * 128 * 2),
    },
    "no_hyperparameters": {
        "architecture": "bert",
        "block_count": None,
        "key_length": None,
        "tensor_count": 0,
        "tensor_bytes": 0,
    },
}


@pytest.fixture(params=sorted(VARIANTS))
def model(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Path]:
    path = tmp_path / f"{request.param}.gguf"
    VARIANTS[request.param](path)
    return request.param, path


def _largest(value: Any) -> Any:
    return max(value) if isinstance(value, list) else value


def _per_layer(value: Any) -> Any:
    return tuple(int(v) for v in value) if isinstance(value, list) and value else None


def reader_info(path: Path) -> GgufInfo:
    """The summary as gguf.GGUFReader sees the file, with llama.cpp's defaults applied."""
    reader = gguf.GGUFReader(str(path))

    def raw(key: str) -> Any:
        field = reader.fields.get(key)
        return None if field is None else field.contents()

    def get(key: str) -> Any:
        return _largest(raw(key))

    arch = get("general.architecture")
    sizes = {t.name: int(t.n_bytes) for t in reader.tensors}
    head_count = get(f"{arch}.attention.head_count")
    head_count_kv = get(f"{arch}.attention.head_count_kv")
    embd = get(f"{arch}.embedding_length")
    per_head = embd // head_count if embd is not None and head_count else None
    key_length = get(f"{arch}.attention.key_length")
    value_length = get(f"{arch}.attention.value_length")
    return GgufInfo(
        version=get("GGUF.version"),
        architecture=arch,
        block_count=get(f"{arch}.block_count"),
        context_length=get(f"{arch}.context_length"),
        embedding_length=embd,
        head_count=head_count,
        head_count_kv=head_count if head_count_kv is None else head_count_kv,
        key_length=per_head if key_length is None else key_length,
        value_length=per_head if value_length is None else value_length,
        tensor_count=len(reader.tensors),
        tensor_bytes=sum(int(t.n_bytes) for t in reader.tensors),
        file_type=get("general.file_type"),
        split_count=get("split.count"),
        head_count_kv_layers=_per_layer(raw(f"{arch}.attention.head_count_kv")),
        feed_forward_layers=_per_layer(raw(f"{arch}.feed_forward_length")),
        sliding_window_layers=_per_layer(raw(f"{arch}.attention.sliding_window_pattern")),
        sliding_window=get(f"{arch}.attention.sliding_window"),
        full_attention_interval=get(f"{arch}.full_attention_interval"),
        ssm_conv_kernel=get(f"{arch}.ssm.conv_kernel"),
        ssm_inner_size=get(f"{arch}.ssm.inner_size"),
        ssm_state_size=get(f"{arch}.ssm.state_size"),
        ssm_group_count=get(f"{arch}.ssm.group_count"),
        shortconv_l_cache=get(f"{arch}.shortconv.l_cache"),
        kv_lora_rank=get(f"{arch}.attention.kv_lora_rank"),
        key_length_mla=get(f"{arch}.attention.key_length_mla"),
        value_length_mla=get(f"{arch}.attention.value_length_mla"),
        vocab_size=next(
            (int(t.shape[1]) for t in reader.tensors if t.name == "token_embd.weight"), None
        ),
        expert_bytes_layers=_ffn_bytes(reader, get(f"{arch}.block_count"), experts=True),
        ffn_bytes_layers=_ffn_bytes(reader, get(f"{arch}.block_count"), experts=False),
        token_embd_bytes=sizes.get("token_embd.weight"),
        output_bytes=sizes.get("output.weight", 0 if reader.tensors else None),
    )


def _ffn_bytes(reader: gguf.GGUFReader, layers: int | None, experts: bool) -> Any:
    """Per layer, the bytes of the FFN weights --n-cpu-moe (experts) or --n-cpu-ffn keep in RAM:
    blk.N.ffn_{up,down,gate,gate_up}_[ch]exps.* or blk.N.ffn_{up,down,gate}.*"""
    sizes: dict[int, int] = {}
    for t in reader.tensors:
        parts = t.name.split(".")
        if len(parts) < 3 or parts[0] != "blk" or not parts[1].isdigit():
            continue
        kind = parts[2]
        if experts:
            base = kind.removesuffix("_exps").removesuffix("_ch")
            hit = kind.endswith("exps") and base in (
                "ffn_up",
                "ffn_down",
                "ffn_gate",
                "ffn_gate_up",
            )
        else:
            hit = kind in ("ffn_up", "ffn_down", "ffn_gate") and len(parts) > 3
        if hit:
            sizes[int(parts[1])] = sizes.get(int(parts[1]), 0) + int(t.n_bytes)
    if not sizes or layers is None or max(sizes) >= layers:
        return None
    return tuple(sizes.get(i, 0) for i in range(layers))


def test_summary_matches_gguf_reader(model: tuple[str, Path]) -> None:
    name, path = model
    with path.open("rb") as stream:
        info = summary(stream)
    assert info == reader_info(path)
    assert info is not None
    for field, value in EXPECTED[name].items():
        assert getattr(info, field) == value, field


class Trickle(io.RawIOBase):
    """A raw, unseekable stream that hands over at most 7 bytes a read and counts them."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = min(len(buffer), 7, len(self.data) - self.pos)
        buffer[:n] = self.data[self.pos : self.pos + n]
        self.pos += n
        return n


def test_partial_reads_and_no_tensor_data(model: tuple[str, Path]) -> None:
    _, path = model
    stream = Trickle(path.read_bytes())
    assert summary(stream) == reader_info(path)
    assert stream.pos <= gguf.GGUFReader(str(path)).data_offset


def test_every_truncation_gives_none_or_the_whole_header(tmp_path: Path) -> None:
    path = tmp_path / "small.gguf"
    every_value_type(path)
    data = path.read_bytes()
    data_offset = gguf.GGUFReader(str(path)).data_offset
    whole = summary(io.BytesIO(data))
    assert whole is not None
    results = [summary(io.BytesIO(data[:n])) for n in range(len(data))]
    first = next(n for n, r in enumerate(results) if r is not None)
    assert all(r is None for r in results[:first])
    assert all(r == whole for r in results[first:])
    assert data_offset - 32 < first <= data_offset  # the header ends; padding and data follow


def _header(version: int = 3, tensors: int = 0, kvs: int = 0) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, tensors, kvs)


def _string(text: bytes) -> bytes:
    return struct.pack("<Q", len(text)) + text


ODD = {
    "empty": b"",
    "not_gguf": b"GGML" + bytes(20),
    "version_1": _header(version=1),
    "version_4": _header(version=4),
    "many_kvs_nothing_after": _header(kvs=2**64 - 1),
    "huge_key": _header(kvs=1) + struct.pack("<Q", 2**63),
    "unknown_value_type": _header(kvs=1) + _string(b"k") + struct.pack("<I", 13),
    "huge_array": _header(kvs=1) + _string(b"k") + struct.pack("<IIQ", 9, 0, 2**62),
    "deep_array": _header(kvs=1)
    + _string(b"k")
    + struct.pack("<I", 9)
    + struct.pack("<IQ", 9, 1) * 20,
    "five_dims": _header(tensors=1) + _string(b"t") + struct.pack("<I5QIQ", 5, *[1] * 5, 0, 0),
    "random": bytes(np.random.default_rng(7).integers(0, 256, 4096, dtype=np.uint8)),
}


@pytest.mark.parametrize("data", ODD.values(), ids=ODD.keys())
def test_odd_input_gives_none(data: bytes) -> None:
    assert summary(io.BytesIO(data)) is None


def test_unknown_tensor_type_gives_unknown_bytes() -> None:
    tensor = _string(b"t") + struct.pack("<IQIQ", 1, 64, 99, 0)
    info = summary(io.BytesIO(_header(tensors=1) + tensor))
    assert info is not None
    assert (info.tensor_count, info.tensor_bytes, info.architecture) == (1, None, None)


# --- on a host: through /bin/sh ---------------------------------------------------------------


def _sh(command: str, path_env: str | None = None) -> str:
    env = dict(os.environ, PATH=path_env if path_env is not None else os.environ["PATH"])
    done = subprocess.run(
        ["/bin/sh", "-c", command], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(shutil.which("python3") is None, reason="needs python3 on PATH")
@pytest.mark.parametrize("name", ["plain.gguf", "two words.gguf", 'it\'s "q" $HOME `x`.gguf'])
def test_remote_command_round_trip(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    quantized_gqa(path)
    output = _sh(remote_command(str(path)))
    assert len(output.splitlines()) == 1
    assert json.loads(output)["gguf"] == "ok"
    assert parse_remote(output) == reader_info(path)


@pytest.mark.skipif(shutil.which("python3") is None, reason="needs python3 on PATH")
@pytest.mark.parametrize(
    ("make", "status"),
    [(None, "missing"), (lambda p: p.write_bytes(b"GGUF\x01"), "invalid"), (Path.mkdir, None)],
    ids=["missing", "invalid", "directory"],
)
def test_remote_command_without_a_model(
    tmp_path: Path, make: Callable[[Path], object] | None, status: str | None
) -> None:
    path = tmp_path / "model.gguf"
    if make is not None:
        make(path)
    output = _sh(remote_command(str(path)))
    record = json.loads(output)
    assert record["gguf"] == (status or "unreadable")
    assert parse_remote(output) is None


def test_remote_command_without_python3(tmp_path: Path) -> None:
    output = _sh(remote_command(str(tmp_path / "model.gguf")), path_env=str(tmp_path))
    assert json.loads(output) == {"gguf": "no-python3"}
    assert parse_remote(output) is None


@pytest.mark.parametrize(
    "output",
    [
        "",
        "Traceback (most recent call last):\nSyntaxError: invalid syntax\n",
        '{"gguf": "ok", "version": "3", "tensor_count": 1}',
        '{"gguf": "ok", "version": 3}',
        '{"gguf": "ok", "version": 3, "tensor_count": 1, "block_count": -1}',
        '{"gguf": "ok", "version": 3, "tensor_count": 1, "architecture": 5}',
        '{"gguf": "ok", "version": 3, "tensor_count": true}',
        "[1, 2]",
        "{not json",
    ],
)
def test_parse_remote_odd_output(output: str) -> None:
    assert parse_remote(output) is None


def test_parse_remote_reads_the_last_json_line() -> None:
    line = json.dumps({"gguf": "ok", "version": 3, "tensor_count": 2, "block_count": 32})
    info = parse_remote(f"motd: welcome\n{line}\n")
    assert info is not None
    assert (info.version, info.tensor_count, info.block_count, info.head_count) == (3, 2, 32, None)


@pytest.mark.skipif(shutil.which("python3") is None, reason="needs python3 on PATH")
def test_remote_command_keeps_per_layer_arrays(tmp_path: Path) -> None:
    path = tmp_path / "hybrid.gguf"
    hybrid_per_layer(path)
    info = parse_remote(_sh(remote_command(str(path))))
    assert info == reader_info(path)
    assert info is not None and info.head_count_kv_layers == (0, 2, 0, 0)


@pytest.mark.parametrize(
    "layers",
    [[1, -2], "0,2", [1.5], [[1]], list(range(5000))],
    ids=["negative", "string", "float", "nested", "too_long"],
)
def test_parse_remote_rejects_odd_per_layer_arrays(layers: object) -> None:
    record = {"gguf": "ok", "version": 3, "tensor_count": 0, "head_count_kv_layers": layers}
    assert parse_remote(json.dumps(record)) is None
