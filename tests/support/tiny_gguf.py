"""A tiny, valid llama-architecture GGUF model (random weights, byte-level SPM vocabulary).

Big enough for llama.cpp to load and generate tokens with, small enough (~0.3 MB) to write in
a test. Its output is noise; the tests only need real completions to come back.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import gguf
import numpy as np

N_EMBD = 64
N_HEAD = 4
N_FF = 128
N_LAYER = 2
N_CTX = 512


def vocabulary() -> tuple[list[bytes], list[float], list[int]]:
    tokens = [b"<unk>", b"<s>", b"</s>"]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    tokens += [f"<0x{i:02X}>".encode() for i in range(256)]
    types += [gguf.TokenType.BYTE] * 256
    words = [" ", "\u2581", "\u2581the", "\u2581a", "\u2581ok", "\u2581hi", "e", "t", "a", "o"]
    tokens += [w.encode() for w in words]
    types += [gguf.TokenType.NORMAL] * len(words)
    scores = [0.0] * 3 + [-1000.0] * 256 + [-float(i) for i in range(len(words))]
    return tokens, scores, [int(t) for t in types]


def write(path: Path, seed: int = 0) -> Path:
    """Write the model to `path` and return it."""
    rng = np.random.default_rng(seed)
    tokens, scores, types = vocabulary()
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("gpuprov-tiny")
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD)
    w.add_rope_dimension_count(N_EMBD // N_HEAD)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)

    def tensor(name: str, *shape: int) -> None:
        w.add_tensor(name, (rng.standard_normal(shape) * 0.02).astype(np.float32))

    n_vocab = len(tokens)
    tensor("token_embd.weight", n_vocab, N_EMBD)
    w.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    tensor("output.weight", n_vocab, N_EMBD)
    for i in range(N_LAYER):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        for part in ("q", "k", "v", "output"):
            tensor(f"blk.{i}.attn_{part}.weight", N_EMBD, N_EMBD)
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        tensor(f"blk.{i}.ffn_gate.weight", N_FF, N_EMBD)
        tensor(f"blk.{i}.ffn_up.weight", N_FF, N_EMBD)
        tensor(f"blk.{i}.ffn_down.weight", N_EMBD, N_FF)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def header_read_on_a_host(path: Path) -> str:
    """The header of the GGUF at `path`, printed by the command the gate runs on a host (here
    through /bin/sh)."""
    from checks.services import gguf_header

    return subprocess.run(
        ["/bin/sh", "-c", gguf_header.remote_command(str(path))],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
