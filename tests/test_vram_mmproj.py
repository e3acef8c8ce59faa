"""The multimodal projector (mmproj) and the draft model llama-server loads beside its model, in
the VRAM budget, against llama.cpp's logs (tests/fixtures/corpus/vram/MANIFEST.tsv).

Headers are header-only GGUFs written with the gguf package (metadata and tensor infos, no
tensor data) carrying what a log prints; what it does not print is the model's published config
(marked "config").
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest

from checks.facts.model import Gpu, HostFacts, LlamaServer, from_dict, probed_on
from checks.services import llama_server_args
from checks.services.gguf_header import GgufInfo, parse_remote, summary
from provision import gate, servicefacts, stack
from provision.servicefacts import ServiceFacts
from provision.vram import (
    DRAFT_PER_SLOT_LAST,
    HF_DRAFT,
    HF_MMPROJ,
    MIB,
    URL_MMPROJ,
    LlamaClaim,
    LlamaMemory,
    LlamaShare,
    Part,
    budget,
    clip_compute_mib,
    draft_claim,
    draft_part,
    llama_claim,
    llama_memory,
    llama_share,
    mmproj_part,
)
from tests.conftest import FIXTURES
from tests.support import tiny_gguf

CORPUS = Path(__file__).parent / "fixtures" / "corpus" / "vram"
GPU = [Gpu(index=0, name="RTX 3090", memory_total_mib=24576)]
TWO_GPUS = [Gpu(index=i, name="RTX 3090", memory_total_mib=24576) for i in range(2)]


def _logged(file: str) -> str:
    return (CORPUS / file).read_text(encoding="utf-8")


def _read(path: Path) -> GgufInfo:
    with path.open("rb") as stream:
        info = summary(stream)
    assert info is not None
    return info


def mmproj(path: Path, kind: str, mib: float = 800.0, **vision: int) -> GgufInfo:
    """A projector's header: clip.projector_type `kind`, the clip.vision.* keys in `vision`
    (embd, ff, heads, image, patch, merge, proj), `deepstack` mergers, and one f16 tensor of
    `mib` MiB standing for its weights."""
    keys = {
        "embd": "embedding_length",
        "ff": "feed_forward_length",
        "heads": "attention.head_count",
        "image": "image_size",
        "patch": "patch_size",
        "merge": "spatial_merge_size",
        "proj": "projection_dim",
    }
    w = gguf.GGUFWriter(str(path), "clip")
    w.add_string("clip.projector_type", kind)
    for name, value in vision.items():
        if name in keys:
            w.add_uint32(f"clip.vision.{keys[name]}", value)
    for i in range(vision.get("deepstack", 0)):
        w.add_tensor_info(f"v.deepstack.{i}.fc2.weight", (16,), np.dtype(np.float32), 64)
    elements = int(mib * MIB) // 2
    w.add_tensor_info("v.blk.0.ffn_up.weight", (elements,), np.dtype(np.float16), elements * 2)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    return _read(path)


def model(path: Path, layers: int = 32, embd: int = 4096, heads: int = 32, kv: int = 8) -> GgufInfo:
    """A llama-architecture header: `layers` layers, `kv` KV heads of embd / heads, 8 GiB."""
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(layers)
    w.add_context_length(131072)
    w.add_embedding_length(embd)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    elements = 4 * 2**30
    w.add_tensor_info("blk.0.rest.weight", (elements,), np.dtype(np.float16), elements * 2)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    return _read(path)


def qwen2_draft(path: Path) -> GgufInfo:
    """DeepSeek-R1-DRAFT-0.6B as ik_llama.cpp#645 logs it: qwen2, 24 layers, n_embd 896, 14 heads,
    2 KV heads (of 64), n_vocab 129280 (a token_embd of that shape)."""
    w = gguf.GGUFWriter(str(path), "qwen2")
    w.add_block_count(24)
    w.add_context_length(131072)
    w.add_embedding_length(896)
    w.add_head_count(14)
    w.add_head_count_kv(2)
    embd = 129280 * 896
    w.add_tensor_info("token_embd.weight", (129280, 896), np.dtype(np.float16), embd * 2)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    return _read(path)


def server(*argv: str) -> LlamaServer:
    return llama_server_args.server("m", ["-m", "/m.gguf", *argv])


# --- the projector's header ------------------------------------------------------------------


def test_the_header_reads_a_projectors_vision_keys(tmp_path: Path) -> None:
    info = mmproj(
        tmp_path / "mm.gguf",
        "qwen3vl_merger",
        embd=1152,
        ff=4304,
        heads=16,
        image=768,
        patch=16,
        merge=2,
        proj=4096,
        deepstack=3,
    )
    assert info.architecture == "clip" and info.projector_type == "qwen3vl_merger"
    assert (info.vision_embedding_length, info.vision_feed_forward_length) == (1152, 4304)
    assert (info.vision_head_count, info.vision_image_size, info.vision_patch_size) == (16, 768, 16)
    assert (info.vision_merge, info.vision_projection_dim) == (2, 4096)
    assert info.vision_deepstack_layers == 3
    assert info.block_count is None  # clip.vision.block_count is no model's block_count
    llm = model(tmp_path / "m.gguf")
    assert llm.projector_type is None and llm.vision_deepstack_layers is None


def test_the_hosts_reader_returns_the_same_projector_header(tmp_path: Path) -> None:
    path = tmp_path / "mm.gguf"
    info = mmproj(path, "gemma3", embd=1152, ff=4304, heads=16, image=896, patch=14)
    assert parse_remote(tiny_gguf.header_read_on_a_host(path)) == info


def test_the_hosts_reader_refuses_a_projector_type_that_is_no_string() -> None:
    record = {"gguf": "ok", "version": 3, "tensor_count": 1, "projector_type": 7}
    assert parse_remote(json.dumps(record)) is None


# --- the CLIP compute buffer against logs ----------------------------------------------------

GEMMA3 = dict(embd=1152, ff=4304, heads=16, image=896, patch=14)
"""gemma 3's SigLIP tower as ggml-org/llama.cpp#22790 logs it (the 4B's); every gemma 3 size has
the same tower (config)."""
QWEN2VL = dict(embd=1280, ff=5120, heads=16, image=560, patch=14, merge=2)
"""Qwen2-VL's 675M ViT, one in every size (config: embed_dim 1280, mlp_ratio 4, 16 heads)."""

# case: (corpus file, logged line, logged MiB, projector, vision keys, flash attention, gap)
CLIP = {
    "gemma3_flash": (
        "vram_gemma3-4b_mmproj_clip_flash__llamacpp-pr22790_cuda0.txt",
        "CUDA0 compute buffer size =   121.25 MiB",
        121.25,
        "gemma3",
        GEMMA3,
        True,
        "",
    ),
    "gemma3_no_flash": (
        "vram_mmproj_clip_flash-on-off_table__gguf-parser-go-44_mi300x.txt",
        "| gemma3 | 1132 | 121 | 1011 |",
        1132.0,
        "gemma3",
        GEMMA3,
        False,
        "",
    ),
    "qwen35_4b_flash": (
        "vram_qwen35-4b_mtp_mmproj_clip__llamacpp-pr22673_cuda1.txt",
        "CUDA0 compute buffer size =   223.30 MiB",
        223.30,
        "qwen3vl_merger",
        # n_tensors 298 = 24 layers x 12 + 10: no deepstack mergers (6 tensors each)
        dict(embd=1024, ff=4096, heads=16, image=768, patch=16, merge=2, proj=2560),
        True,
        "",
    ),
    "qwen3vl_8b_flash": (
        "vram_qwen3vl-8b_mmproj_clip_oom__llamacpp-18181_cuda0.txt",
        "allocating 372.08 MiB on device 0",
        372.08,
        "qwen3vl_merger",
        # deepstack mergers after layers 8, 16 and 24 (config: deepstack_visual_indexes)
        dict(embd=1152, ff=4304, heads=16, image=768, patch=16, merge=2, proj=4096, deepstack=3),
        True,
        "0.940: qwen3vl.cpp holds 22 MiB more than its layers' peak and the three deepstack"
        " outputs (99 MiB) counted here; the failed reservation's log does not say which tensors",
    ),
    "qwen2vl_no_flash": (
        "vram_mmproj_clip_flash-on-off_table__gguf-parser-go-44_mi300x.txt",
        "| Qwen2-VL | 4598 | 267 | 4331 |",
        4598.0,
        "qwen2vl_merger",
        QWEN2VL,
        False,
        "",
    ),
    "qwen2vl_flash": (
        "vram_mmproj_clip_flash-on-off_table__gguf-parser-go-44_mi300x.txt",
        "| Qwen2-VL | 4598 | 267 | 4331 |",
        267.0,
        "qwen2vl_merger",
        QWEN2VL,
        True,
        "1.084: CLIP_LIVE_FLASH activations, checked on gemma 3's tower (build_vit), over-count"
        " the layers qwen2vl.cpp builds itself by 22 MiB at this shape; the table gives totals",
    ),
}


def _clip_cases() -> list[object]:
    out: list[object] = []
    for case, (*_, gap) in sorted(CLIP.items()):
        marks = [pytest.mark.xfail(strict=True, reason=gap)] if gap else []
        out.append(pytest.param(case, marks=marks, id=case))
    return out


@pytest.mark.parametrize("case", _clip_cases())
def test_clip_compute_within_5_percent_of_the_logged_size(tmp_path: Path, case: str) -> None:
    file, line, logged, kind, vision, flash, _ = CLIP[case]
    assert line in _logged(file)
    info = mmproj(tmp_path / "mm.gguf", kind, **vision)
    estimate = clip_compute_mib(info, flash)
    assert isinstance(estimate, float), estimate
    assert estimate == pytest.approx(logged, rel=0.05)


def test_the_warmup_image_is_the_one_clip_cpp_logs(tmp_path: Path) -> None:
    """gemma 3 warms up at its image_size (896 x 896: 64 x 64 patches of 14); Qwen-VL at 46 x 46
    merged tokens (1472 x 1472 at patch 16, merge 2: 92 x 92 patches), whatever its image_size.
    Without flash attention the f32 scores of 16 heads over the patches dominate."""
    assert "warmup with image size = 896 x 896" in _logged(CLIP["gemma3_flash"][0])
    assert "warmup with image size = 1472 x 1472" in _logged(CLIP["qwen3vl_8b_flash"][0])
    gemma = mmproj(tmp_path / "g.gguf", "gemma3", **GEMMA3)
    assert clip_compute_mib(gemma, True) == 4096 * 4 * (4304 + 3 * 1152) / MIB
    assert clip_compute_mib(gemma, False) == 4096 * 4 * (4096 * 16 + 6 * 1152) / MIB
    qwen = mmproj(tmp_path / "q.gguf", "qwen3vl_merger", embd=1024, ff=4096, heads=16, patch=16)
    assert clip_compute_mib(qwen, True) == 8464 * 4 * (4096 + 3 * 1024) / MIB  # merge 2 default


@pytest.mark.parametrize(
    ("kind", "vision", "why"),
    [
        ("pixtral", dict(GEMMA3), "projector pixtral not modelled"),
        ("qwen2.5vl_merger", dict(QWEN2VL), "projector qwen2.5vl_merger not modelled"),
        ("gemma3", dict(GEMMA3, ff=0), "header lacks the vision tower's sizes"),
        ("gemma3", {k: v for k, v in GEMMA3.items() if k != "image"}, "clip.vision.image_size"),
        ("qwen3vl_merger", dict(QWEN2VL, deepstack=3), "projection_dim of its deepstack"),
    ],
    ids=["pixtral", "window-attention", "no-ff", "no-image-size", "deepstack-no-proj"],
)
def test_a_projector_not_modelled_stays_unknown(
    tmp_path: Path, kind: str, vision: dict[str, int], why: str
) -> None:
    info = mmproj(tmp_path / "mm.gguf", kind, **vision)
    estimate = clip_compute_mib(info, True)
    assert isinstance(estimate, str) and why in estimate


def test_the_projectors_weights_are_its_tensors(tmp_path: Path) -> None:
    """load_hparams' "model size" is the sum of the file's tensors: 811.79 MiB for gemma 3's."""
    assert "model size:         811.79 MiB" in _logged(CLIP["gemma3_flash"][0])
    info = mmproj(tmp_path / "mm.gguf", "gemma3", mib=811.79, **GEMMA3)
    claim = LlamaClaim("m", (), None, 4096, mmproj="/mm.gguf", mmproj_model=info)
    part = mmproj_part(claim)
    assert isinstance(part, Part) and not part.missing
    assert part.weights_mib == pytest.approx(811.79, abs=0.01)
    assert part.compute_mib == pytest.approx(121.25, rel=0.05)


# --- the projector in the budget ---------------------------------------------------------------


@pytest.fixture
def gemma_mmproj(tmp_path: Path) -> GgufInfo:
    return mmproj(tmp_path / "mm.gguf", "gemma3", mib=811.79, **GEMMA3)


@pytest.fixture
def llama(tmp_path: Path) -> GgufInfo:
    return model(tmp_path / "m.gguf")


def test_the_projector_holds_the_first_gpu_only(llama: GgufInfo, gemma_mmproj: GgufInfo) -> None:
    """clip.cpp loads the projector on one device, the first GPU: its share there, nothing on the
    second, which holds half the model as the first does."""
    claim = llama_claim("m", server("-c", "8192", "--mmproj", "/mm.gguf"), llama, gemma_mmproj)
    rows = budget(TWO_GPUS, [claim]).rows
    first, second = (row.holders[0] for row in rows)
    assert [p[0] for p in first.parts] == ["mmproj"] and second.parts == ()
    assert first.mib is not None and second.mib is not None
    assert first.mib - second.mib == pytest.approx(811.79 + 121.25, abs=0.1)
    table = "\n".join(budget(TWO_GPUS, [claim]).lines())
    assert "+ mmproj" in table and "CLIP compute 121.2 MiB (gemma3)" in table


def test_a_model_that_fits_alone_does_not_fit_with_its_projector(
    llama: GgufInfo, gemma_mmproj: GgufInfo
) -> None:
    """ggml-org/llama.cpp#18181: the projector's compute buffer did not fit beside a model sized
    without it. A GPU the model alone fits, the projector overfills: the budget refuses it."""
    alone = llama_claim("m", server("-c", "8192"), llama)
    share = llama_share(alone, 1)
    assert isinstance(share, LlamaShare)
    gpu = [Gpu(index=0, name="g", memory_total_mib=int(share.total_mib) + 500)]
    assert budget(gpu, [alone]).fits
    with_mmproj = llama_claim(
        "m", server("-c", "8192", "--mmproj", "/mm.gguf"), llama, gemma_mmproj
    )
    verdict = budget(gpu, [with_mmproj])
    assert not verdict.fits and "over by" in verdict.problems[0]


@pytest.mark.parametrize(
    ("argv", "source", "offload"),
    [
        (["--mmproj", "/mm.gguf"], "/mm.gguf", True),
        (["-mm", "/mm.gguf", "--no-mmproj-offload"], "/mm.gguf", False),
        (["-mm", "/mm.gguf", "--no-mmproj-offload", "--mmproj-offload"], "/mm.gguf", True),
        (["-mm", "/mm.gguf", "-mmdev", "none"], "/mm.gguf", False),
        (["-mm", "/mm.gguf", "--mmproj-device", "CUDA1"], "/mm.gguf", True),
        (["-hf", "ggml-org/gemma-3-4b-it-GGUF"], HF_MMPROJ, True),
        (["-hf", "ggml-org/gemma-3-4b-it-GGUF", "--no-mmproj"], "", True),
        (["-hfr", "org/repo", "--no-mmproj-auto"], "", True),
        (["-hf", "org/repo", "--no-mmproj", "--mmproj-auto"], HF_MMPROJ, True),
        (["-hf", "org/repo", "--mmproj", "/mm.gguf"], "/mm.gguf", True),
        (["--mmproj-url", "https://example.org/mm.gguf"], URL_MMPROJ, True),
        (["-hff", "model.gguf"], "", True),  # a file of a repository, no -hf: nothing downloaded
        ([], "", True),
    ],
)
def test_the_arguments_that_load_a_projector(argv: list[str], source: str, offload: bool) -> None:
    claim = llama_claim("m", server(*argv), None)
    assert (claim.mmproj, claim.mmproj_offload) == (source, offload)


def test_a_projector_on_a_named_device_says_where_it_is_counted(
    llama: GgufInfo, gemma_mmproj: GgufInfo
) -> None:
    argv = ("-c", "8192", "--mmproj", "/mm.gguf", "-mmdev", "CUDA1")
    part = mmproj_part(llama_claim("m", server(*argv), llama, gemma_mmproj))
    assert part is not None and "[--mmproj-device CUDA1: counted on the first GPU]" in part.how


def test_a_projector_kept_in_ram_holds_nothing_on_the_gpu(
    llama: GgufInfo, gemma_mmproj: GgufInfo
) -> None:
    argv = ("-c", "8192", "--mmproj", "/mm.gguf", "--no-mmproj-offload")
    part = mmproj_part(llama_claim("m", server(*argv), llama, gemma_mmproj))
    assert part is not None and (part.mib, part.missing) == (0, "")
    assert "kept in RAM" in part.how


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["-hf", "org/repo"], "mmproj of -hf not counted: its size is unknown before download"),
        (["--mmproj-url", "https://x/mm.gguf"], "unknown before download"),
        (["--mmproj", "/srv/mm.gguf"], "mmproj /srv/mm.gguf not counted: its header was not read"),
    ],
)
def test_a_projector_of_unknown_size_is_not_counted_and_says_so(
    llama: GgufInfo, argv: list[str], said: str
) -> None:
    claim = llama_claim("m", server("-c", "8192", *argv), llama)
    verdict = budget(GPU, [claim])
    (holder,) = verdict.rows[0].holders
    assert holder.mib is not None and verdict.rows[0].unknown
    assert holder.parts == (("mmproj", None, holder.parts[0][2]),)  # nothing of it counted
    assert any(said in p and p.startswith("unknown: m on GPU 0") for p in verdict.problems)
    assert verdict.fits  # known parts still fit; the unknown one is a warning


def test_a_projector_not_modelled_counts_its_weights_and_says_the_rest_is_not(
    tmp_path: Path, llama: GgufInfo
) -> None:
    pixtral = mmproj(tmp_path / "px.gguf", "pixtral", mib=837.36, **GEMMA3)
    claim = llama_claim("m", server("-c", "8192", "-mm", "/px.gguf"), llama, pixtral)
    part = mmproj_part(claim)
    assert part is not None and part.weights_mib == pytest.approx(837.36, abs=0.01)
    assert part.compute_mib == 0 and "projector pixtral not modelled" in part.missing
    llm_as_mmproj = mmproj_part(replace(claim, mmproj_model=llama))
    assert llm_as_mmproj is not None and "architecture llama" in llm_as_mmproj.missing


# --- the draft model -----------------------------------------------------------------------------

DRAFT_LOG = "vram_draft-qwen2-0.6b_3gpu_q8k_noflash__iklamacpp-pr645_3x3090.txt"


def test_the_draft_context_equals_the_logged_kv_and_compute(tmp_path: Path) -> None:
    """ik_llama.cpp#645: the draft's context, 16384 cells of one sequence, K q8_0 and V f16 (that
    fork passes -ctk on to the draft), no flash attention, over 3 GPUs built with one copy per
    input (GGML_SCHED_MAX_COPIES=1: no pipeline copies here). KV 24 x 16384 x 128 x (34/32 + 2)
    bytes = 147.00 MiB; the compute buffer, each GPU's, is the scores of 14 heads over the cells."""
    text = _logged(DRAFT_LOG)
    assert "KV self size  =  147.00 MiB, K (q8_0):   51.00 MiB, V (f16):   96.00 MiB" in text
    assert "CUDA1 compute buffer size =   487.00 MiB" in text and "pipeline parallelism" in text
    draft = qwen2_draft(tmp_path / "d.gguf")
    claim = LlamaClaim("d", (), draft, 16384, 1, "q8_0", "f16", flash_attn="off", no_pipeline=True)
    memory = llama_memory(claim, draft, 3)
    assert isinstance(memory, LlamaMemory)
    assert round(memory.kv_mib, 2) == 147.00
    assert memory.compute_mib == pytest.approx(487.00, rel=0.05)


@pytest.fixture
def draft(tmp_path: Path) -> GgufInfo:
    return qwen2_draft(tmp_path / "draft.gguf")


def test_a_draft_context_takes_the_targets_cells_and_slots(
    llama: GgufInfo, draft: GgufInfo
) -> None:
    """Current builds: one draft context with the target's n_ctx and slots, its own cache types
    (f16 unless -ctkd/-ctvd), flash attention and ubatch as the target's."""
    argv = ("-c", "65536", "-np", "2", "-ctk", "q8_0", "-ctv", "q8_0", "-ub", "1024", "-md", "/d")
    claim = llama_claim("m", server(*argv), llama, draft=draft)
    derived, contexts = draft_claim(claim)
    assert contexts == 1 and derived.model is draft
    assert (derived.ctx_size, derived.parallel, derived.kv_unified) == (65536, 2, False)
    assert (derived.cache_type_k, derived.cache_type_v, derived.n_ubatch) == ("f16", "f16", 1024)
    typed = llama_claim("m", server(*argv, "-ctkd", "q8_0", "-ctvd", "Q8_0"), llama, draft=draft)
    assert draft_claim(typed)[0].cache_type_v == "q8_0"
    auto = llama_claim("m", server("-md", "/d"), llama, draft=draft)
    assert draft_claim(auto)[0].ctx_size == 131072  # no -c: the target's trained context


def test_older_builds_and_cd_give_each_slot_a_draft_context(
    llama: GgufInfo, draft: GgufInfo
) -> None:
    """Up to DRAFT_PER_SLOT_LAST, and wherever -cd is given: one context per slot, one sequence,
    -cd cells or the slot's (tools/server/server-context.cpp of those builds)."""
    argv = ("-c", "32768", "-np", "4", "-md", "/d")
    old = replace(llama_claim("m", server(*argv), llama, draft=draft), build=DRAFT_PER_SLOT_LAST)
    derived, contexts = draft_claim(old)
    assert contexts == 4 and (derived.ctx_size, derived.parallel) == (8192, 1)
    assert draft_claim(replace(old, build=DRAFT_PER_SLOT_LAST + 1))[1] == 1
    given = llama_claim("m", server(*argv, "-cd", "2048"), llama, draft=draft)
    derived, contexts = draft_claim(given)
    assert (contexts, derived.ctx_size, derived.n_ubatch) == (4, 2048, 512)
    part = draft_part(given, 1)
    one = draft_part(replace(given, parallel=1, draft_ctx=2048), 1)
    assert part is not None and one is not None
    assert part.kv_mib == pytest.approx(4 * one.kv_mib)
    assert part.compute_mib == pytest.approx(4 * one.compute_mib)


def test_the_draft_is_its_own_line_and_counts_in_the_total(
    llama: GgufInfo, draft: GgufInfo
) -> None:
    alone = llama_claim("m", server("-c", "16384"), llama)
    claim = llama_claim("m", server("-c", "16384", "-md", "/d"), llama, draft=draft)
    before, after = llama_share(alone, 1), llama_share(claim, 1)
    assert isinstance(before, LlamaShare) and isinstance(after, LlamaShare)
    part = after.draft
    assert part is not None and not part.missing
    assert part.kv_mib == pytest.approx(24 * 16384 * 128 * 4 / MIB)  # f16 K and V
    assert part.weights_mib == pytest.approx(129280 * 896 * 2 / MIB)  # token_embd as its output
    assert after.total_mib == pytest.approx(before.total_mib + part.mib)
    table = "\n".join(budget(GPU, [claim]).lines())
    assert "+ draft model" in table and "(16384 ctx, f16/f16)" in table


def test_draft_layers_kept_in_ram_leave_its_weights_and_kv_off_the_gpu(
    llama: GgufInfo, draft: GgufInfo
) -> None:
    claim = llama_claim("m", server("-c", "16384", "-md", "/d", "-ngld", "0"), llama, draft=draft)
    part = draft_part(claim, 1)
    assert part is not None and (part.weights_mib, part.kv_mib) == (0, 0)
    assert part.compute_mib > 0 and "0/25 layers" in part.how


@pytest.mark.parametrize(
    ("argv", "header", "said"),
    [
        (["--spec-draft-hf", "org/draft"], False, f"draft model of {HF_DRAFT} not counted"),
        (["-md", "/srv/d.gguf"], False, "draft model /srv/d.gguf not counted: its header"),
        (["-md", "/srv/d.gguf", "-ctkd", "q3_k"], True, "cache type 'q3_k' unknown"),
        (["-md", "/d", "-ctvd", "q8_0", "-fa", "off"], True, "quantized V cache needs flash"),
    ],
)
def test_a_draft_of_unknown_size_is_not_counted_and_says_so(
    llama: GgufInfo, draft: GgufInfo, argv: list[str], header: bool, said: str
) -> None:
    claim = llama_claim("m", server("-c", "8192", *argv), llama, draft=draft if header else None)
    verdict = budget(GPU, [claim])
    assert any(said in p and p.startswith("unknown: m on GPU 0") for p in verdict.problems)


def test_no_draft_and_no_projector_change_nothing(llama: GgufInfo) -> None:
    share = llama_share(llama_claim("m", server("-c", "8192"), llama), 1)
    assert isinstance(share, LlamaShare) and (share.mmproj, share.draft) == (None, None)
    (holder,) = budget(GPU, [llama_claim("m", server("-c", "8192"), llama)]).rows[0].holders
    assert (holder.parts, holder.missing) == ((), ())


# --- the gate reads their headers on the host ------------------------------------------------

MAIN = {"name": "main", "model": "/srv/models/m.gguf", "port": 8080}


def _judged(profile: dict[str, Any], found: ServiceFacts) -> gate.HostGate:
    data = json.loads((FIXTURES / "stack" / "rtx3090-cuda12.8.json").read_text())["facts"]
    facts = from_dict(HostFacts, data)
    facts.sources = [probed_on("gpuprov", "box", "(pyinfra)")]
    s = stack.from_data({"llama_server_profiles": [profile]})
    verdict = gate.judge("box", facts, s)
    gate.judge_services(verdict, s, found)
    return verdict


def test_the_gate_reads_the_projector_and_draft_headers(tmp_path: Path) -> None:
    paths = [str(tmp_path / name) for name in ("m.gguf", "mm.gguf", "d.gguf")]
    profile = {**MAIN, "model": paths[0], "extra_args": ["--mmproj", paths[1], "-md", paths[2]]}
    s = stack.from_data({"llama_server_profiles": [profile]})
    reads = [(kind, key) for kind, key, _ in servicefacts.reads(s, "")]
    assert [("gguf", p) for p in paths] == [r for r in reads if r[0] == "gguf"]
    model(Path(paths[0]), layers=2, embd=256, heads=4, kv=4)
    mmproj(Path(paths[1]), "gemma3", **GEMMA3)
    qwen2_draft(Path(paths[2]))
    gguf_text: dict[str, str | None] = {p: tiny_gguf.header_read_on_a_host(Path(p)) for p in paths}
    verdict = _judged(profile, ServiceFacts(gguf=gguf_text))
    assert verdict.budget is not None
    table = "\n".join(verdict.budget.lines())
    assert "+ mmproj" in table and "+ draft model" in table
    assert not [p for p in verdict.budget.problems if "not counted" in p]
    del gguf_text[paths[1]]
    verdict = _judged(profile, ServiceFacts(gguf=gguf_text))
    assert verdict.budget is not None
    assert any("mmproj " + paths[1] + " not counted" in p for p in verdict.budget.problems)


# --- the corpus ----------------------------------------------------------------------------------


def test_every_vram_log_has_its_manifest_row() -> None:
    lines = (CORPUS / "MANIFEST.tsv").read_text(encoding="utf-8").splitlines()
    listed = {line.split("\t", 1)[0] for line in lines[1:] if line}
    files = {p.name for p in CORPUS.iterdir() if p.name != "MANIFEST.tsv"}
    assert listed == files
