"""GGUF model headers read as a stream: metadata, tensor infos, and the sizes llama.cpp loads.

Pure standard library (Python >= 3.7), so this file also runs as a script on a host that has
only python3 (`remote_command`). Reading stops before the tensor data; the only arrays kept are
the per-layer hyperparameters (at most MAX_LAYERS entries each); odd or truncated input gives
None, never an exception. Format: ggml-org/ggml docs/gguf.md, versions 2
and 3 (version 3 adds big-endian files; version 1 used 32-bit counts and is not read).
"""

from __future__ import annotations

import json
import re
import shlex
import struct
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from typing import BinaryIO

MAGIC = b"GGUF"
VERSIONS = (2, 3)
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_KEY = 65535  # gguf.md: keys are at most 65535 bytes
MAX_KEPT_STRING = 4096
MAX_NESTING = 8
MAX_LAYERS = 4096  # llama.cpp's LLAMA_MAX_LAYERS is 512; a longer per-layer array is not kept
_CHUNK = 1 << 20

# ggml type id: (name, elements per block, bytes per block). Equal to gguf.GGML_QUANT_SIZES.
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("f32", 1, 4),
    1: ("f16", 1, 2),
    2: ("q4_0", 32, 18),
    3: ("q4_1", 32, 20),
    6: ("q5_0", 32, 22),
    7: ("q5_1", 32, 24),
    8: ("q8_0", 32, 34),
    9: ("q8_1", 32, 40),
    10: ("q2_k", 256, 84),
    11: ("q3_k", 256, 110),
    12: ("q4_k", 256, 144),
    13: ("q5_k", 256, 176),
    14: ("q6_k", 256, 210),
    15: ("q8_k", 256, 292),
    16: ("iq2_xxs", 256, 66),
    17: ("iq2_xs", 256, 74),
    18: ("iq3_xxs", 256, 98),
    19: ("iq1_s", 256, 50),
    20: ("iq4_nl", 32, 18),
    21: ("iq3_s", 256, 110),
    22: ("iq2_s", 256, 82),
    23: ("iq4_xs", 256, 136),
    24: ("i8", 1, 1),
    25: ("i16", 1, 2),
    26: ("i32", 1, 4),
    27: ("i64", 1, 8),
    28: ("f64", 1, 8),
    29: ("iq1_m", 256, 56),
    30: ("bf16", 1, 2),
    34: ("tq1_0", 256, 54),
    35: ("tq2_0", 256, 66),
    39: ("mxfp4", 32, 17),
    40: ("nvfp4", 64, 36),
    41: ("q1_0", 128, 18),
}
TYPE_IDS = {name: type_id for type_id, (name, _, _) in GGML_TYPES.items()}

# GGUF metadata value types (gguf_type): struct formats of the fixed-size ones.
_SCALARS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
_INTEGERS = (0, 1, 2, 3, 4, 5, 10, 11)
_STRING = 8
_ARRAY = 9

# Per-architecture keys ("{arch}.<suffix>") that the summary reads.
_ARCH_KEYS = {
    "block_count": "block_count",
    "context_length": "context_length",
    "embedding_length": "embedding_length",
    "attention.head_count": "head_count",
    "attention.head_count_kv": "head_count_kv",
    "attention.key_length": "key_length",
    "attention.value_length": "value_length",
    "attention.sliding_window": "sliding_window",
    "full_attention_interval": "full_attention_interval",
    "ssm.conv_kernel": "ssm_conv_kernel",
    "ssm.inner_size": "ssm_inner_size",
    "ssm.state_size": "ssm_state_size",
    "ssm.group_count": "ssm_group_count",
    "shortconv.l_cache": "shortconv_l_cache",
    "attention.kv_lora_rank": "kv_lora_rank",
    "attention.key_length_mla": "key_length_mla",
    "attention.value_length_mla": "value_length_mla",
}
# Keys that some models store as one value per layer: the summary keeps the array (as a tuple)
# beside the largest value (head_count_kv) or instead of it.
_LAYER_KEYS = {
    "attention.head_count_kv": "head_count_kv_layers",
    "feed_forward_length": "feed_forward_layers",
    "attention.sliding_window_pattern": "sliding_window_layers",
}
_GENERAL_KEYS = ("general.architecture", "general.file_type", "split.count")
# A multimodal projector's (mmproj, general.architecture "clip") vision keys the summary reads
# (llama.cpp tools/mtmd/clip-impl.h); its projector type is one string or the other.
_VISION_KEYS = {
    "clip.vision.embedding_length": "vision_embedding_length",
    "clip.vision.feed_forward_length": "vision_feed_forward_length",
    "clip.vision.attention.head_count": "vision_head_count",
    "clip.vision.image_size": "vision_image_size",
    "clip.vision.patch_size": "vision_patch_size",
    "clip.vision.projection_dim": "vision_projection_dim",
    "clip.vision.spatial_merge_size": "vision_merge",
    "clip.vision.projector.scale_factor": "vision_merge",
}
_PROJECTOR_KEYS = ("clip.projector_type", "clip.vision.projector_type")
# The deepstack mergers of a vision tower (Qwen3-VL), by tensor name.
_VISION_DEEPSTACK = re.compile(r"v\.deepstack\.\d{1,5}\.fc2\.weight")
_STRING_FIELDS = ("projector_type",)


@dataclass(frozen=True)
class TensorInfo:
    """One tensor's header entry: its dims (innermost first) and ggml type id."""

    name: str
    dims: tuple[int, ...]
    ggml_type: int

    @property
    def n_bytes(self) -> int | None:
        """Size of its data, from the type's block size; None for a type not in GGML_TYPES."""
        entry = GGML_TYPES.get(self.ggml_type)
        if entry is None:
            return None
        count = 1
        for dim in self.dims:
            count *= dim
        return count * entry[2] // entry[1]


@dataclass(frozen=True)
class GgufInfo:
    """What a GGUF header says about the memory a model needs; None where it does not say.

    head_count / head_count_kv stored per layer give their largest value. head_count_kv defaults
    to head_count and key/value_length to embedding_length / head_count, as in llama.cpp.
    tensor_bytes is None when a tensor has a type this module does not know. split_count > 1
    means the header is one file of a split model: its tensors are only that file's.

    The fields after split_count size the KV cache and recurrent state as llama.cpp allocates
    them: the per-layer arrays as stored (head_count_kv_layers: 0 marks a layer without
    attention; sliding_window_layers: 1 marks a sliding-window layer), the sliding window, the
    hybrid full_attention_interval, the ssm.* and shortconv sizes of recurrent layers, the MLA
    latent sizes, and vocab_size (the token_embd tensor's second dimension).

    The fields from projector_type on are a multimodal projector's (architecture "clip"; None
    for any other file): its projector type, vision tower sizes, spatial merge and deepstack
    mergers.
    """

    version: int
    architecture: str | None
    block_count: int | None
    context_length: int | None
    embedding_length: int | None
    head_count: int | None
    head_count_kv: int | None
    key_length: int | None
    value_length: int | None
    tensor_count: int
    tensor_bytes: int | None
    file_type: int | None
    split_count: int | None
    head_count_kv_layers: tuple[int, ...] | None = None
    feed_forward_layers: tuple[int, ...] | None = None
    sliding_window_layers: tuple[int, ...] | None = None
    sliding_window: int | None = None
    full_attention_interval: int | None = None
    ssm_conv_kernel: int | None = None
    ssm_inner_size: int | None = None
    ssm_state_size: int | None = None
    ssm_group_count: int | None = None
    shortconv_l_cache: int | None = None
    kv_lora_rank: int | None = None
    key_length_mla: int | None = None
    value_length_mla: int | None = None
    vocab_size: int | None = None
    expert_bytes_layers: tuple[int, ...] | None = None
    ffn_bytes_layers: tuple[int, ...] | None = None
    token_embd_bytes: int | None = None
    output_bytes: int | None = None
    projector_type: str | None = None
    vision_embedding_length: int | None = None
    vision_feed_forward_length: int | None = None
    vision_head_count: int | None = None
    vision_image_size: int | None = None
    vision_patch_size: int | None = None
    vision_projection_dim: int | None = None
    vision_merge: int | None = None
    vision_deepstack_layers: int | None = None


_LAYER_FIELDS = (*_LAYER_KEYS.values(), "expert_bytes_layers", "ffn_bytes_layers")
# The weights llama.cpp's --cpu-moe / --n-cpu-moe and --n-cpu-ffn keep in RAM (common/common.h:
# LLM_FFN_EXPS_REGEX "\\.ffn_(up|down|gate|gate_up)_(ch|)exps", LLM_FFN_DENSE_REGEX
# "\\.ffn_(up|down|gate)\\."), per layer.
_EXPERTS = re.compile(r"blk\.(\d{1,5})\.ffn_(?:up|down|gate|gate_up)_(?:ch)?exps")
_DENSE_FFN = re.compile(r"blk\.(\d{1,5})\.ffn_(?:up|down|gate)\.")


class _Malformed(Exception):
    """The stream ends early or holds something GGUF does not allow."""


class _Stream:
    """Little reads from a binary stream in one byte order; never more than asked."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self.order = "<"

    def take(self, n: int) -> bytes:
        """Exactly `n` bytes; a raw stream may hand them over in parts."""
        data = b""
        while len(data) < n:
            part = self._stream.read(n - len(data))
            if not part:
                raise _Malformed("truncated")
            data += bytes(part)
        return data

    def skip(self, n: int) -> None:
        while n > 0:
            step = min(n, _CHUNK)
            self.take(step)
            n -= step

    def unpack(self, fmt: str) -> int | float | bool:
        """One value; struct caches the compiled formats."""
        value: int | float | bool = struct.unpack(
            self.order + fmt, self.take(struct.calcsize(fmt))
        )[0]
        return value

    def count(self, fmt: str = "Q") -> int:
        """An unsigned count: "Q" (uint64) or "I" (uint32)."""
        value = self.unpack(fmt)
        if not isinstance(value, int):
            raise _Malformed("count")
        return value

    def string(self, limit: int) -> str | None:
        """A GGUF string; one longer than `limit` is skipped and gives None."""
        n = self.count()
        if n > limit:
            self.skip(n)
            return None
        return self.take(n).decode("utf-8", "replace")


def _value(s: _Stream, vtype: int, keep: bool, depth: int = 0) -> object:
    """Read one metadata value; return it when `keep`, else skip it.

    A kept array of integers or booleans gives its items as a tuple of ints (None past
    MAX_LAYERS items); any other array gives None.
    """
    if vtype in _SCALARS:
        return s.unpack(_SCALARS[vtype])
    if vtype == _STRING:
        return s.string(MAX_KEPT_STRING if keep else 0)
    if vtype != _ARRAY or depth >= MAX_NESTING:
        raise _Malformed(f"value type {vtype}")
    item_type = s.count("I")
    n = s.count()
    wanted = keep and depth == 0 and item_type in (*_INTEGERS, 7) and n <= MAX_LAYERS
    if item_type in _SCALARS:
        if not wanted:
            s.skip(n * struct.calcsize(_SCALARS[item_type]))
            return None
        fmt = _SCALARS[item_type]
        return tuple(int(s.unpack(fmt)) for _ in range(n))
    for _ in range(n):
        _value(s, item_type, False, depth + 1)
    return None


def _wanted(key: str) -> bool:
    return (
        key in _GENERAL_KEYS
        or key in _VISION_KEYS
        or key in _PROJECTOR_KEYS
        or any(key.endswith("." + suffix) for suffix in (*_ARCH_KEYS, *_LAYER_KEYS))
    )


def _vision(meta: dict[str, object], deepstack: int) -> dict[str, object]:
    """A projector's fields (GgufInfo from projector_type on) from its metadata."""
    found: dict[str, object] = {"vision_deepstack_layers": deepstack}
    for key, name in _VISION_KEYS.items():
        if found.get(name) is None:
            found[name] = _size(meta.get(key))
    kinds = [meta.get(key) for key in _PROJECTOR_KEYS]
    found["projector_type"] = next((k for k in kinds if isinstance(k, str) and k), None)
    return found


def _tensor_infos(s: _Stream, count: int) -> Iterator[TensorInfo]:
    for _ in range(count):
        name = s.string(MAX_KEY)
        n_dims = s.count("I")
        if name is None or n_dims > MAX_DIMS:
            raise _Malformed("tensor info")
        dims = tuple(s.count() for _ in range(n_dims))
        ggml_type = s.count("I")
        s.count()  # offset into the tensor data
        yield TensorInfo(name, dims, ggml_type)


def _size(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _largest(value: object) -> int | None:
    """A count stored as a scalar or per layer: the scalar, or the array's largest item."""
    if isinstance(value, tuple):
        return max((v for v in value if _size(v) is not None), default=None)
    return _size(value)


def _layers(value: object) -> tuple[int, ...] | None:
    """A per-layer array of counts; None for a scalar, an empty array or a negative item."""
    if isinstance(value, (tuple, list)) and value and all(_size(v) is not None for v in value):
        return tuple(value)
    return None


def _read(stream: BinaryIO) -> GgufInfo | None:
    s = _Stream(stream)
    if s.take(4) != MAGIC:
        return None
    raw = s.take(4)
    version: int = struct.unpack("<I", raw)[0]
    if version not in VERSIONS:
        s.order = ">"
        version = struct.unpack(">I", raw)[0]
        if version not in VERSIONS:
            return None
    tensor_count = s.count()
    kv_count = s.count()
    meta: dict[str, object] = {}
    for _ in range(kv_count):
        key = s.string(MAX_KEY)
        if key is None:
            return None
        keep = _wanted(key)
        value = _value(s, s.count("I"), keep)
        if keep:
            meta[key] = value
    tensor_bytes: int | None = 0
    vocab_size: int | None = None
    by_layer: dict[str, dict[int, int]] = {"experts": {}, "ffn": {}}
    ends: dict[str, int | None] = {}
    deepstack = 0
    for tensor in _tensor_infos(s, tensor_count):
        deepstack += 1 if _VISION_DEEPSTACK.fullmatch(tensor.name) else 0
        n_bytes = tensor.n_bytes
        tensor_bytes = None if n_bytes is None or tensor_bytes is None else tensor_bytes + n_bytes
        if tensor.name == "token_embd.weight" and len(tensor.dims) == 2:
            vocab_size = tensor.dims[1]
        if tensor.name in ("token_embd.weight", "output.weight"):
            ends[tensor.name] = n_bytes
        for kind, pattern in (("experts", _EXPERTS), ("ffn", _DENSE_FFN)):
            found = pattern.match(tensor.name)
            if found and n_bytes is not None:
                layer = int(found.group(1))
                by_layer[kind][layer] = by_layer[kind].get(layer, 0) + n_bytes
    named = meta.get("general.architecture")
    arch = named if isinstance(named, str) and named else None
    hp = {
        name: _largest(meta.get(f"{arch}.{suffix}")) if arch else None
        for suffix, name in _ARCH_KEYS.items()
    }
    per_layer = {
        name: _layers(meta.get(f"{arch}.{suffix}")) if arch else None
        for suffix, name in _LAYER_KEYS.items()
    }
    head_count = hp["head_count"]
    head_count_kv = hp["head_count_kv"] if hp["head_count_kv"] is not None else head_count
    embedding = hp["embedding_length"]
    per_head = embedding // head_count if embedding is not None and head_count else None
    vision = _vision(meta, deepstack) if arch == "clip" else {}
    return GgufInfo(
        version=version,
        architecture=arch,
        block_count=hp["block_count"],
        context_length=hp["context_length"],
        embedding_length=embedding,
        head_count=head_count,
        head_count_kv=head_count_kv,
        key_length=hp["key_length"] if hp["key_length"] is not None else per_head,
        value_length=hp["value_length"] if hp["value_length"] is not None else per_head,
        tensor_count=tensor_count,
        tensor_bytes=tensor_bytes,
        file_type=_size(meta.get("general.file_type")),
        split_count=_size(meta.get("split.count")),
        head_count_kv_layers=per_layer["head_count_kv_layers"],
        feed_forward_layers=per_layer["feed_forward_layers"],
        sliding_window_layers=per_layer["sliding_window_layers"],
        sliding_window=hp["sliding_window"],
        full_attention_interval=hp["full_attention_interval"],
        ssm_conv_kernel=hp["ssm_conv_kernel"],
        ssm_inner_size=hp["ssm_inner_size"],
        ssm_state_size=hp["ssm_state_size"],
        ssm_group_count=hp["ssm_group_count"],
        shortconv_l_cache=hp["shortconv_l_cache"],
        kv_lora_rank=hp["kv_lora_rank"],
        key_length_mla=hp["key_length_mla"],
        value_length_mla=hp["value_length_mla"],
        vocab_size=vocab_size,
        expert_bytes_layers=_per_layer(by_layer["experts"], hp["block_count"]),
        ffn_bytes_layers=_per_layer(by_layer["ffn"], hp["block_count"]),
        token_embd_bytes=ends.get("token_embd.weight"),
        output_bytes=ends.get("output.weight", 0 if tensor_count else None),
        **vision,  # type: ignore[arg-type]  # each value checked in _vision
    )


def _per_layer(sizes: dict[int, int], layers: int | None) -> tuple[int, ...] | None:
    """Bytes per layer 0..layers-1 (0 where a layer has none); None if none has any, or a
    layer number is past block_count."""
    if not sizes or layers is None or max(sizes) >= layers or layers > MAX_LAYERS:
        return None
    return tuple(sizes.get(il, 0) for il in range(layers))


def summary(stream: BinaryIO) -> GgufInfo | None:
    """The header of the GGUF file `stream` is at the start of; None if it is not one."""
    try:
        return _read(stream)
    except (_Malformed, OSError, ValueError, struct.error, OverflowError, MemoryError):
        return None


def _source() -> str:
    """This module's own source: the reader that runs on the host (standard library only)."""
    from checks import packaged  # here, not above: on the host this file runs alone

    return packaged.path("checks.services", "gguf_header.py").read_text(encoding="utf-8")


def remote_command(path: str) -> str:
    """A POSIX sh command printing one JSON line about the GGUF file at `path` on the host."""
    run = f"python3 -I -S -c {shlex.quote(_source())} {shlex.quote(path)}"
    absent = shlex.quote(json.dumps({"gguf": "no-python3"}))
    return f"if command -v python3 >/dev/null 2>&1; then {run}; else echo {absent}; fi"


def parse_remote(output: str) -> GgufInfo | None:
    """The GgufInfo in `remote_command`'s output; None when python3, the file or a header is not."""
    for line in reversed(output.splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):  # the host's output: nested too deep is no header
            continue
        if isinstance(record, dict) and record.get("gguf") == "ok":
            return _from_record(record)
        return None
    return None


def _from_record(record: dict[str, object]) -> GgufInfo | None:
    arch = record.get("architecture")
    if arch is not None and not isinstance(arch, str):
        return None
    values: dict[str, object] = {f.name: None for f in fields(GgufInfo)}
    values["architecture"] = arch
    for f in fields(GgufInfo):
        value = record.get(f.name)
        if f.name == "architecture" or value is None:
            continue
        if f.name in _STRING_FIELDS:
            if not isinstance(value, str) or len(value) > MAX_KEPT_STRING:
                return None
            values[f.name] = value
            continue
        kept = _layers(value) if f.name in _LAYER_FIELDS else _size(value)
        if kept is None or (isinstance(kept, tuple) and len(kept) > MAX_LAYERS):
            return None
        values[f.name] = kept
    if _size(values.get("version")) is None or _size(values.get("tensor_count")) is None:
        return None
    return GgufInfo(**values)  # type: ignore[arg-type]  # each value checked above


def _report(path: str) -> dict[str, object]:
    try:
        with open(path, "rb") as stream:
            info = summary(stream)
    except FileNotFoundError:
        return {"gguf": "missing", "path": path}
    except OSError as exc:
        return {"gguf": "unreadable", "path": path, "error": exc.strerror or type(exc).__name__}
    if info is None:
        return {"gguf": "invalid", "path": path}
    record: dict[str, object] = {"gguf": "ok"}
    record.update(asdict(info))
    return record


def main(argv: list[str]) -> int:
    """Print one JSON line about the GGUF file named by the only argument."""
    if len(argv) != 1:
        print(json.dumps({"gguf": "usage", "error": "one argument: the GGUF file"}))
        return 2
    print(json.dumps(_report(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
