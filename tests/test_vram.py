"""The VRAM budget of a host: the seed stacks, llama.cpp from a real GGUF header, and unknowns."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from checks.facts.model import Gpu, LlamaServer
from checks.services.gguf_header import GgufInfo, summary
from checks.services.llama_server_args import server
from provision import stack
from provision.vram import (
    CUDA_CONTEXT_MIB,
    MIB,
    Budget,
    LlamaClaim,
    LlamaShare,
    VllmClaim,
    budget,
    llama_claim,
    llama_share,
)
from tests.support import tiny_gguf

RTX_3090 = "NVIDIA GeForce RTX 3090"
TWO_3090 = [Gpu(index=i, name=RTX_3090, memory_total_mib=24576) for i in (0, 1)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> GgufInfo:
    path = tiny_gguf.write(tmp_path_factory.mktemp("gguf") / "tiny.gguf")
    with Path(path).open("rb") as stream:
        info = summary(stream)
    assert info is not None
    return info


def held(result: Budget) -> dict[int, dict[str, float | None]]:
    return {row.index: {h.service: h.mib for h in row.holders} for row in result.rows}


def row_line(result: Budget, index: int) -> str:
    return next(line for line in result.lines() if line.startswith(f"{index} "))


def test_two_replicas_at_092_fit_on_two_3090s() -> None:
    result = budget(TWO_3090, [VllmClaim("a", (0,), 0.92), VllmClaim("b", (1,), 0.92)])
    assert result.fits and result.problems == []
    assert held(result) == {0: {"a": pytest.approx(22609.92)}, 1: {"b": pytest.approx(22609.92)}}
    assert [row.free_mib for row in result.rows] == [pytest.approx(1966.08)] * 2
    assert row_line(result, 0).split()[-1] == "ok"
    assert "22.1 GiB" in row_line(result, 0) and "1.9 GiB" in row_line(result, 0)


def test_a_third_replica_on_gpu_0_does_not_fit() -> None:
    claims = [VllmClaim("a", (0,), 0.92), VllmClaim("b", (1,), 0.92), VllmClaim("c", (0,), 0.92)]
    result = budget(TWO_3090, claims)
    assert not result.fits
    assert result.problems == [
        f"GPU 0 ({RTX_3090}): vLLM fractions sum to 1.84 > 1.0 (a 0.92, c 0.92);"
        " vLLM refuses to start without that much free memory",
        f"GPU 0 ({RTX_3090}): 44.2 GiB held of 24.0 GiB (over by 20.2 GiB)",
    ]
    assert row_line(result, 0).split()[-1] == "over"
    assert row_line(result, 1).split()[-1] == "ok"
    assert "-20.2 GiB" in row_line(result, 0)


def test_fractions_over_one_fail_even_when_memory_is_unknown() -> None:
    gpus = [Gpu(index=0, name=RTX_3090)]
    result = budget(gpus, [VllmClaim("a", (0,), 0.6), VllmClaim("b", (0,), 0.5)])
    assert not result.fits
    assert result.problems[0].startswith(f"GPU 0 ({RTX_3090}): vLLM fractions sum to 1.10")
    assert result.problems[1:] == [
        f"unknown: GPU 0 ({RTX_3090}): total memory unknown, not checked",
        f"unknown: a on GPU 0 ({RTX_3090}): vLLM 0.6 x unknown total",
        f"unknown: b on GPU 0 ({RTX_3090}): vLLM 0.5 x unknown total",
    ]


def test_tensor_parallel_claims_each_of_its_gpus() -> None:
    result = budget(TWO_3090, [VllmClaim("tp", (0, 1), 0.9)])
    assert result.fits
    assert held(result) == {0: {"tp": pytest.approx(22118.4)}, 1: {"tp": pytest.approx(22118.4)}}


def overhead(
    model: GgufInfo, cells: int, ubatch: int = 512, copies: int = 1, quantized: str = ""
) -> float:
    """Compute buffers with flash attention, the larger of the attention peak (f16 mask over
    `cells`, f32 Q/K/V and 3 activations of n_embd, and f16 copies over `cells` of the parts of
    the cache that are `quantized`, "K", "V" or "KV") and the output peak (f32 logits and 2
    activations), plus the CUDA context; with pipeline parallelism, `copies` copies of the mask
    and of one n_embd activation held beside the peak (where the mask is no longer counted)."""
    embd, vocab = model.embedding_length or 0, model.vocab_size or 0
    k, v = model.key_length or 0, model.value_length or 0
    qkv = (model.head_count or 0) * k + (model.head_count_kv or 0) * (k + v)
    mask = 2 * cells * ubatch
    attention = ubatch * 4 * (qkv + 3 * embd)
    converted = k * ("K" in quantized) + v * ("V" in quantized)
    attention += 2 * cells * (model.head_count_kv or 0) * converted
    output = 4 * ubatch * (vocab + 2 * embd)
    if copies == 1:
        return max(attention + mask, output) / MIB + CUDA_CONTEXT_MIB
    held = copies * (mask + 4 * ubatch * embd)
    return (max(attention, output) + held) / MIB + CUDA_CONTEXT_MIB


def kv_mib(layers: int, ctx: int, elements: int, bytes_per_32: float) -> float:
    """K plus V of every layer, for `elements` per token and layer, in MiB."""
    return 2 * layers * ctx * elements * bytes_per_32 / 32 / MIB


# tiny_gguf: 2 layers, 4 heads of 16 (64 KV elements per token and layer), context_length 512.
LLAMA_CASES = {
    "f16_4096_one_gpu": (
        dict(gpus=(0,), ctx_size=4096),
        {0: ("all", 4096, 64.0)},
    ),
    # 512 over 4 separate slots: 128 each, padded to 256 cells (llama-context.cpp)
    "ctx_0_is_context_length": (
        dict(gpus=(0,), ctx_size=0, parallel=4),
        {0: ("all", 1024, 64.0)},
    ),
    "ctx_0_unified_slots": (
        dict(gpus=(0,), ctx_size=0, parallel=4, kv_unified=True),
        {0: ("all", 512, 64.0)},
    ),
    "ctx_padded_to_256": (
        dict(gpus=(0,), ctx_size=4000),
        {0: ("all", 4096, 64.0)},
    ),
    "q8_0_cache": (
        dict(gpus=(0,), ctx_size=8192, cache_type_k="q8_0", cache_type_v="Q8_0"),
        {0: ("all", 8192, 34.0)},
    ),
    # -ngl 1 of 3: the output layer only, no repeating layer and so no KV (i_gpu_start = 2)
    "one_of_three_layers": (
        dict(gpus=(0,), ctx_size=4096, gpu_layers="1"),
        {0: ("output", 4096, 64.0)},
    ),
    "every_gpu_split_evenly": (
        dict(gpus=(), ctx_size=4096, gpu_layers="all"),
        {0: (1 / 2, 4096, 64.0), 1: (1 / 2, 4096, 64.0)},
    ),
    "more_layers_than_the_model": (
        dict(gpus=(1,), ctx_size=4096, gpu_layers="99"),
        {1: ("all", 4096, 64.0)},
    ),
}


@pytest.mark.parametrize("case", sorted(LLAMA_CASES))
def test_llama_claim_from_a_real_gguf_header(tiny: GgufInfo, case: str) -> None:
    kwargs, expected = LLAMA_CASES[case]
    result = budget(TWO_3090, [LlamaClaim("tiny", model=tiny, **kwargs)])
    assert result.fits and result.problems == []
    for index, (share, ctx, bytes_per_32) in expected.items():
        # token_embd stays in RAM (llama.cpp's input layer); -ngl 1 puts the output layer alone
        on_gpu = (tiny.tensor_bytes or 0) - (tiny.token_embd_bytes or 0)
        if share == "output":
            part, cached, on_gpu = 1.0, 0.0, tiny.output_bytes or 0
        elif share == "all":
            part = cached = 1.0
        else:
            part = cached = float(share)
        want = on_gpu / MIB * part + kv_mib(2, ctx, 64, bytes_per_32) * cached
        slots = 1 if kwargs.get("kv_unified") else int(kwargs.get("parallel", 1))  # type: ignore[call-overload]
        # all layers on both GPUs: pipeline parallelism, 4 copies of each GPU's inputs
        copies = 4 if not kwargs["gpus"] and kwargs.get("gpu_layers") == "all" else 1
        quantized = "KV" if kwargs.get("cache_type_k", "f16") != "f16" else ""
        cells = overhead(tiny, ctx // slots, copies=copies, quantized=quantized)
        assert held(result)[index] == {"tiny": pytest.approx(want + cells)}
    untouched = {0, 1} - set(expected)
    assert all(held(result)[i] == {} for i in untouched)


def test_split_mode_row_or_partial_offload_holds_no_input_copies(tiny: GgufInfo) -> None:
    """llama.cpp enables pipeline parallelism only for a layer split of every layer over more
    than one GPU with the KV cache offloaded (src/llama-context.cpp)."""
    server = LlamaServer(argv=["-sm", "row"], ctx_size=4096, n_gpu_layers="all", parallel=1)
    row = llama_claim("t", server, tiny)
    assert row.no_pipeline
    layer = llama_claim("t", LlamaServer(argv=[], ctx_size=4096, parallel=1), tiny)
    assert not layer.no_pipeline
    one = overhead(tiny, 4096)
    for claim in (row, dataclasses.replace(layer, gpu_layers="1")):
        share = llama_share(claim, 2)
        assert isinstance(share, LlamaShare)
        assert share.compute_mib + share.cuda_mib == pytest.approx(one)
    share = llama_share(layer, 2)
    assert isinstance(share, LlamaShare)
    assert share.compute_mib + share.cuda_mib == pytest.approx(overhead(tiny, 4096, copies=4))
    assert "pipeline parallel: 4 input copies" in share.memory.notes


def test_llama_beside_a_replica_overflows(tiny: GgufInfo) -> None:
    claims = [VllmClaim("a", (0,), 0.98), LlamaClaim("tiny", (0,), tiny, ctx_size=4096)]
    result = budget(TWO_3090, claims)
    assert not result.fits
    assert result.problems == [f"GPU 0 ({RTX_3090}): 24.1 GiB held of 24.0 GiB (over by 70.6 MiB)"]
    (holder,) = [line for line in result.lines() if line.startswith("       tiny ")]
    assert holder.endswith(
        "llama.cpp weights 0.4 MiB + KV 2.0 MiB (4096 ctx / 1 slots, f16/f16) in 2 layers"
        " + compute 4.8 MiB + CUDA 555 MiB"
    )


def test_large_model_kv_at_32k_gqa() -> None:
    """Llama 3.1 8B's shape: 32 layers, 8 KV heads of 128; 32768 ctx of f16 is 4 GiB of KV."""
    model = GgufInfo(
        3,
        "llama",
        32,
        131072,
        4096,
        32,
        8,
        128,
        128,
        292,
        4_920_734_016,
        15,
        None,
        vocab_size=128256,
    )
    result = budget(TWO_3090, [LlamaClaim("l8b", (1,), model, ctx_size=32768)])
    assert held(result)[1]["l8b"] == pytest.approx(
        4_920_734_016 / MIB + 4096 + overhead(model, 32768)
    )


@pytest.mark.parametrize(
    ("model", "claim", "why"),
    [
        (None, {}, "llama.cpp: model header unknown"),
        ("tiny", {"cache_type_k": "q2_k"}, "llama.cpp: cache type 'q2_k' unknown"),
        ("no_ctx", {"ctx_size": 0}, "llama.cpp: ctx_size 0 and no context_length in the header"),
        ("split", {}, "llama.cpp: split model (3 files)"),
        ("no_types", {}, "llama.cpp: a tensor type is unknown"),
    ],
    ids=["no_model", "bad_cache_type", "no_context", "split", "unknown_tensor_type"],
)
def test_unknown_llama_holder_warns(
    tiny: GgufInfo, model: str | None, claim: dict[str, object], why: str
) -> None:
    models = {
        "tiny": tiny,
        "no_ctx": GgufInfo(3, "x", 2, None, 64, 4, 4, 16, 16, 1, 10, None, None),
        "split": GgufInfo(3, "x", 2, 512, 64, 4, 4, 16, 16, 1, 10, None, 3),
        "no_types": GgufInfo(3, "x", 2, 512, 64, 4, 4, 16, 16, 1, None, None, None),
    }
    settings: dict[str, object] = {"ctx_size": 4096, **claim}
    llama = LlamaClaim("m", (0,), None if model is None else models[model], **settings)
    result = budget(TWO_3090, [llama, VllmClaim("a", (1,), 0.9)])
    assert result.fits
    assert result.problems == [f"unknown: m on GPU 0 ({RTX_3090}): {why}"]
    assert held(result)[0] == {"m": None}
    assert row_line(result, 0).split()[-1] == "unknown"
    assert row_line(result, 1).split()[-1] == "ok"
    assert any(line.startswith("       m ") and " ? " in line for line in result.lines())


def test_gpu_index_out_of_range() -> None:
    result = budget(TWO_3090, [VllmClaim("a", (0, 2), 0.5)])
    assert not result.fits
    assert result.problems == ["a: GPU 2 is not on this host (GPUs: 0, 1)"]
    assert held(result)[0] == {"a": pytest.approx(12288.0)}


def test_no_gpus_at_all(tiny: GgufInfo) -> None:
    result = budget([], [VllmClaim("a", (0,), 0.5), LlamaClaim("m", (), tiny, 4096)])
    assert not result.fits
    assert result.problems == [
        "a: GPU 0 is not on this host (GPUs: none)",
        "m: uses no GPU of this host",
    ]
    assert result.lines() == [result.lines()[0]]


def test_table_columns_are_fixed() -> None:
    gpus = [
        Gpu(
            index=0,
            name="NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
            memory_total_mib=97887,
        )
    ]
    result = budget(gpus, [VllmClaim("a-very-long-replica-name-of-forty-chars", (0,), 0.5)])
    head, gpu, holder = result.lines()
    assert head.index("TOTAL") + len("TOTAL") == gpu.index("95.6 GiB") + len("95.6 GiB")
    assert gpu.startswith("0    NVIDIA RTX PRO 6000 Blackwe...")
    assert holder.index("47.8 GiB") == gpu.index("47.8 GiB")
    assert holder.endswith("vLLM 0.5 x 97887 MiB")


def test_a_ctx_size_in_extra_args_counts(tiny: GgufInfo) -> None:
    """The claim is read from the unit's arguments: the last --ctx-size wins, extra_args too."""
    profile = {"name": "tiny", "model": "/m.gguf", "port": 8080, "ctx_size": 4096}
    plain = stack.from_data({"llama_server_profiles": [profile]}).profiles[0]
    extra = {**profile, "extra_args": ["-c", "65536", "-ctv", "q8_0", "-ngl", "1"]}
    more = stack.from_data({"llama_server_profiles": [extra]}).profiles[0]
    claims = [llama_claim(p.unit, server(p.name, p.args()), tiny) for p in (plain, more)]
    assert claims[0] == LlamaClaim(plain.unit, (), tiny, 4096, flash_attn="auto")
    assert claims[1] == LlamaClaim(
        more.unit, (), tiny, 65536, 1, "f16", "q8_0", "1", flash_attn="auto"
    )
    one = budget(TWO_3090[:1], claims[:1])
    two = budget(TWO_3090[:1], claims[1:])
    # 16 times the context, a q8_0 V cache, and one layer of three on the GPU: -ngl 1 is the
    # output layer alone (src/llama-model.cpp: i_gpu_start = n_layer + 1 - n_gpu_layers), so
    # its weights and no KV (the 2 repeating layers hold it, in RAM)
    assert held(two)[0][more.unit] == pytest.approx(
        (tiny.output_bytes or 0) / MIB + overhead(tiny, 65536, quantized="V")
    )
    assert held(two)[0][more.unit] > held(one)[0][plain.unit]
    (holder,) = [line for line in two.lines() if more.unit[:28] in line]
    assert "(65536 ctx / 1 slots, f16/q8_0) in 2 layers" in holder and "1/3 layers" in holder


def test_a_claim_leaves_unset_settings_to_llama_cpp(tiny: GgufInfo) -> None:
    """Without --parallel, llama-server runs 4 slots on one unified cache."""
    assert llama_claim("m", LlamaServer(parallel=-1), tiny) == LlamaClaim(
        "m", (), tiny, 0, 4, kv_unified=True
    )
    argv = ["-np", "2", "-ub", "1024", "--swa-full", "--ubatch-size=256", "-fa", "off"]
    server_args = LlamaServer(parallel=2, flash_attn="off", argv=argv)
    assert llama_claim("m", server_args, tiny) == LlamaClaim(
        "m", (), tiny, 0, 2, flash_attn="off", n_ubatch=256, swa_full=True
    )


@pytest.mark.parametrize(
    ("argv", "moe", "ffn", "other"),
    [
        (["--cpu-moe"], -1, 0, False),
        (["-cmoe", "-ncmoe", "4"], -1, 0, False),
        (["--n-cpu-moe", "10"], 10, 0, False),
        (["--n-cpu-moe=3", "--n-cpu-ffn", "2"], 3, 2, False),
        (["-ot", r"\.ffn_.*_exps\.=CPU"], -1, 0, False),
        (["-ot", ".ffn_.*_exps.=CPU"], -1, 0, False),
        (["--override-tensor", "exps=CPU,token_embd=CPU"], -1, 0, True),
        (["-ot", r"blk\.(1[0-9])\.ffn_.*_exps\.=CPU"], 0, 0, True),
        (["-ot", "exps=CUDA1"], 0, 0, True),
        (["--n-cpu-moe", "x"], 0, 0, False),
        ([], 0, 0, False),
    ],
)
def test_weights_kept_in_ram_are_read_from_the_arguments(
    tiny: GgufInfo, argv: list[str], moe: int, ffn: int, other: bool
) -> None:
    """common/arg.cpp: --cpu-moe keeps every layer's experts in RAM, --n-cpu-moe N those of
    layers 0..N-1, --n-cpu-ffn N their dense FFN; -ot is read only in the usual forms for
    every expert, anything else is noted."""
    claim = llama_claim("m", LlamaServer(parallel=1, argv=argv), tiny)
    assert (claim.cpu_moe_layers, claim.cpu_ffn_layers, claim.other_overrides) == (moe, ffn, other)


def test_experts_kept_in_ram_leave_the_gpu(tiny: GgufInfo) -> None:
    """A 4-layer MoE whose experts are 100 MiB a layer: --cpu-moe leaves none of them on the
    GPU, --n-cpu-moe 3 one layer's, and -ngl 3 of 5 (the output and layers 2-3) with
    --n-cpu-moe 3 one layer's as well (layer 2's experts stay in RAM)."""
    mib = 2**20
    model = dataclasses.replace(
        tiny,
        block_count=4,
        tensor_bytes=500 * mib,
        token_embd_bytes=10 * mib,
        output_bytes=10 * mib,
        expert_bytes_layers=(100 * mib,) * 4,
    )

    def weights(*argv: str, layers: str = "") -> float:
        server = LlamaServer(parallel=1, argv=list(argv), n_gpu_layers=layers or None)
        share = llama_share(llama_claim("m", server, model), 1)
        assert isinstance(share, LlamaShare), share
        return share.weights_mib

    assert weights() == pytest.approx(490)  # all but token_embd
    assert weights("--cpu-moe") == pytest.approx(90)
    assert weights("--n-cpu-moe", "3") == pytest.approx(190)
    # 120 MiB a layer (480 over 4), layers 2 and 3 and the output; layer 2's experts in RAM
    assert weights("--n-cpu-moe", "3", layers="3") == pytest.approx(2 * 120 + 10 - 100)


@pytest.mark.parametrize(
    ("layers", "label"), [("-1", ""), ("99", ""), ("all", ""), ("lots", "'lots' read as all")]
)
def test_every_layer_on_the_gpu_however_it_is_asked(
    tiny: GgufInfo, layers: str, label: str
) -> None:
    """-ngl -1 (older llama.cpp's "all"), a number past the model, "all": no share to show; an
    unreadable value is read as all and says so."""
    share = llama_share(LlamaClaim("m", (0,), tiny, 4096, gpu_layers=layers), 1)
    assert isinstance(share, LlamaShare)
    assert share.layers == label
    assert share.weights_mib * MIB == (tiny.tensor_bytes or 0) - (tiny.token_embd_bytes or 0)
