"""`gpuprov fit`: the VRAM estimate of one llama-server against named, captured or host GPUs.

The models are header-only GGUFs written with the gguf package: metadata and tensor infos, no
tensor data (the reader stops before it), so a model of gigabytes is a file of a few hundred bytes.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest
from typer.testing import CliRunner

from checks.facts import nvml
from checks.facts.model import Gpu, HostFacts
from checks.facts.probe import ProbeUnavailable
from checks.services.gguf_header import GgufInfo, summary
from provision import fit_cli, vram
from provision.cli import app
from tests.conftest import REAL

RTX_3060 = REAL / "nvsmi_xml__telegraf_rtx-3060-v12.xml"  # one RTX 3060, 12288 MiB
TWO_3090 = REAL / "llamacpp_init__ggml-15294_2x-rtx3090.txt"  # two RTX 3090, no memory size
GIB = 1024**3
EMBD_BYTES = 128256 * 4096 * 2  # token_embd.weight, f16


def llama_8b(w: gguf.GGUFWriter) -> None:
    """Llama-3.1-8B's attention shape: 32 layers, 8 KV heads of 128, 131072 trained context."""
    w.add_block_count(32)
    w.add_context_length(131072)
    w.add_embedding_length(4096)
    w.add_head_count(32)
    w.add_head_count_kv(8)


def write(
    path: Path,
    fill: Callable[[gguf.GGUFWriter], None] = llama_8b,
    weights: int = 6 * GIB,
    arch: str = "llama",
) -> Path:
    """A header-only GGUF: `fill`'s metadata, token_embd and one f16 tensor of `weights` bytes
    (minus the embedding)."""
    w = gguf.GGUFWriter(str(path), arch)
    fill(w)
    w.add_tensor_info("token_embd.weight", (128256, 4096), np.dtype(np.float16), EMBD_BYTES)
    rows = (weights - EMBD_BYTES) // (4096 * 2)
    w.add_tensor_info("blk.0.rest.weight", (rows, 4096), np.dtype(np.float16), rows * 4096 * 2)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    return path


def header(path: Path) -> GgufInfo:
    with path.open("rb") as stream:
        info = summary(stream)
    assert info is not None
    return info


def gpuprov(*argv: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(argv))
    assert "Traceback" not in result.stderr
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return write(tmp_path / "llama-8b.gguf")


@pytest.fixture
def no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    def absent() -> HostFacts:
        raise ProbeUnavailable("NVML library not found")

    monkeypatch.setattr(nvml, "read", absent)


def test_a_model_that_fits_an_rtx_5090(model: Path) -> None:
    code, out, _ = gpuprov("fit", str(model), "--ctx", "32768", "--gpu", "RTX 5090")
    assert code == 0
    assert "KV cache            4.0 GiB  32 layers, 32768 cells" in out  # 32 x 2 x 32768 x 1024 x 2
    assert "CUDA context      555.0 MiB" in out
    assert "GeForce RTX 5090" in out and "\nfits\n" in out


def test_the_parts_add_up_to_what_the_budget_holds(model: Path) -> None:
    claim = fit_cli.claim_for(
        str(model), header(model), fit_cli.Settings(65536, 2, "q8_0", "q8_0", "on", 1024)
    )
    share = vram.llama_share(claim, 2)
    assert isinstance(share, vram.LlamaShare)
    gpus = [Gpu(index=i, name="g", memory_total_mib=24576) for i in range(2)]
    row = vram.budget(gpus, [claim]).rows[0]
    assert row.used_mib == pytest.approx(share.total_mib)
    assert share.weights_mib == pytest.approx(6 * 1024 / 2)
    assert (share.memory.cells, claim.parallel, claim.kv_unified) == (65536, 2, False)


def test_a_model_that_does_not_fit_exits_1_and_says_by_how_much(model: Path) -> None:
    code, out, _ = gpuprov(
        "fit", str(model), "--ctx", "131072", "--flash-attn", "off", "--gpu", "RTX 3060:12288"
    )
    assert code == 1
    assert "DOES NOT FIT" in out
    assert "GPU 0 (RTX 3060):" in out and "(over by" in out


def test_the_largest_context_is_the_last_that_fits(model: Path) -> None:
    info = header(model)
    gpus = [Gpu(index=0, name="g", memory_total_mib=12288)]
    claim = fit_cli.claim_for(str(model), info, fit_cli.Settings(4096))
    largest = fit_cli.largest_ctx(gpus, claim, 131072)
    assert largest is not None and 4096 < largest < 131072
    assert largest % vram.KV_PAD == 0  # cells come in 256s: the last ctx of the last step that fits
    assert fit_cli.fits(gpus, replace(claim, ctx_size=largest))
    assert not fit_cli.fits(gpus, replace(claim, ctx_size=largest + 1))
    code, out, _ = gpuprov("fit", str(model), "--ctx", "4096", "--gpu", "x:12288")
    assert code == 0 and f"largest --ctx that fits: {largest}\n" in out


def test_the_largest_context_stops_at_the_trained_context(model: Path) -> None:
    code, out, _ = gpuprov("fit", str(model), "--ctx", "4096", "--gpu", "H100")
    assert code == 0
    assert "largest --ctx that fits: 131072, the model's trained context" in out


def test_weights_alone_too_big_leave_no_context(model: Path) -> None:
    code, out, _ = gpuprov("fit", str(model), "--ctx", "4096", "--gpu", "small:4096", "--json")
    data = json.loads(out)
    assert code == 1 and data["fits"] is False and data["largest_ctx"] is None


def test_json_shape(model: Path) -> None:
    code, out, _ = gpuprov(
        "fit", str(model), "--ctx", "8192", "--parallel", "1", "--gpu", "RTX 4090", "--json"
    )
    data = json.loads(out)
    assert code == 0
    assert data["schema_version"] == fit_cli.FIT_SCHEMA_VERSION
    assert set(data) == {
        "schema_version",
        "model",
        "settings",
        "per_gpu",
        "gpus_from",
        "gpus",
        "fits",
        "problems",
        "largest_ctx",
        "search_limit",
    }
    assert data["model"]["context_length"] == 131072
    assert data["settings"]["ctx"] == 8192 and data["settings"]["parallel"] == 1
    part = data["per_gpu"]
    assert part["kv_mib"] == 1024 and part["cells"] == 8192 and part["kv_layers"] == 32
    assert part["total_mib"] == pytest.approx(
        part["weights_mib"] + part["kv_mib"] + part["recurrent_mib"] + part["compute_mib"] + 555
    )
    (gpu,) = data["gpus"]
    assert gpu["total_mib"] == 24 * 1024 and gpu["held_mib"] == pytest.approx(part["total_mib"])
    assert "nominal" in data["gpus_from"]
    assert data["fits"] is True and data["problems"] == []


def test_from_a_real_capture(model: Path) -> None:
    code, out, _ = gpuprov("fit", str(model), "--ctx", "65536", "--from", str(RTX_3060), "--json")
    data = json.loads(out)
    assert [(g["name"], g["total_mib"]) for g in data["gpus"]] == [
        ("NVIDIA GeForce RTX 3060", 12288)
    ]
    assert data["gpus_from"] == f"--from {RTX_3060}"
    assert code == 1 and data["fits"] is False  # 6 GiB + 8 GiB of KV


def test_from_a_capture_without_memory_sizes_uses_the_gpu_table(model: Path) -> None:
    code, out, _ = gpuprov("fit", str(model), "--ctx", "8192", "--from", str(TWO_3090))
    assert code == 0
    assert "each of 2" in out and "GPU 0, 1: the GPU table's nominal size" in out
    assert out.count("NVIDIA GeForce RTX 3090") == 2


def test_this_hosts_gpus_come_from_nvml(model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = HostFacts(gpus=[Gpu(index=0, name="NVIDIA RTX PRO 6000", memory_total_mib=97887)])
    monkeypatch.setattr(nvml, "read", lambda: host)
    code, out, _ = gpuprov("fit", str(model), "--ctx", "131072")
    assert code == 0 and "GPUs from this host (NVML):" in out and "95.6 GiB" in out


def test_no_gpu_prints_the_estimate_and_exits_0(model: Path, no_nvml: None) -> None:
    code, out, _ = gpuprov("fit", str(model), "--ctx", "8192")
    assert code == 0
    assert "total" in out and "no GPU read: NVML library not found" in out
    data = json.loads(gpuprov("fit", str(model), "--ctx", "8192", "--json")[1])
    assert (data["fits"], data["gpus"], data["largest_ctx"]) == (None, [], None)


def test_a_missing_file_exits_2_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope.gguf"
    code, out, err = gpuprov("fit", str(missing), "--ctx", "8192", "--gpu", "RTX 5090")
    assert (code, out) == (2, "")
    assert f"{missing}: no such file" in err


def test_a_folder_exits_2_naming_it(tmp_path: Path) -> None:
    code, _, err = gpuprov("fit", str(tmp_path), "--ctx", "8192", "--gpu", "RTX 5090")
    assert code == 2 and f"{tmp_path}: cannot read it" in err


@pytest.mark.parametrize(
    "content",
    [b"", b"not a gguf at all", b"GGUF\x03\x00\x00\x00\x01"],
    ids=["empty", "text", "cut"],
)
def test_a_malformed_file_exits_2_naming_it(tmp_path: Path, content: bytes) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(content)
    code, _, err = gpuprov("fit", str(bad), "--ctx", "8192", "--gpu", "RTX 5090")
    assert code == 2 and f"{bad}: not a GGUF file, or its header is malformed" in err


def test_a_truncated_real_header_exits_2(model: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(model.read_bytes()[:-20])
    code, _, err = gpuprov("fit", str(cut), "--ctx", "8192", "--gpu", "RTX 5090")
    assert code == 2 and str(cut) in err


def test_a_split_model_exits_2_naming_it(tmp_path: Path) -> None:
    def split(w: gguf.GGUFWriter) -> None:
        llama_8b(w)
        w.add_uint16("split.no", 0)
        w.add_uint16("split.count", 3)

    part = write(tmp_path / "m-00001-of-00003.gguf", split)
    code, _, err = gpuprov("fit", str(part), "--ctx", "8192", "--gpu", "RTX 5090")
    assert code == 2 and f"{part}: one file of a split model (3 files)" in err


def test_a_header_without_layers_exits_2(tmp_path: Path) -> None:
    def bare(w: gguf.GGUFWriter) -> None:
        w.add_context_length(4096)

    path = write(tmp_path / "bare.gguf", bare)
    code, _, err = gpuprov("fit", str(path), "--ctx", "8192", "--gpu", "RTX 5090")
    assert code == 2 and f"{path}: cannot estimate it: header lacks block_count" in err


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--gpu", "Foo 9000"], "not in the GPU table"),
        (["--gpu", "A100"], "several memory sizes"),
        (["--gpu", "RTX 5090:lots"], "a positive size"),
        (["--gpu", ":24576"], "a positive size"),
        (["--cache-type-k", "q3_k"], "not a cache type llama.cpp takes"),
        (["--n-gpu-layers", "most"], "a number, all or auto"),
        (["--gpu", "RTX 5090", "--from", str(RTX_3060)], "not both"),
        (["--cache-type-v", "q4_0", "--flash-attn", "off", "--gpu", "H100"], "flash attention"),
        (["--from", str(REAL / "err804__vllm-4940_docker-run.txt")], "err804__vllm-4940"),
        (["--from", str(REAL / "nvcc_version__flash-attn-1921_12.6.txt")], "no GPU in the capt"),
    ],
)
def test_bad_input_exits_2(model: Path, args: list[str], said: str) -> None:
    code, out, err = gpuprov("fit", str(model), "--ctx", "8192", *args)
    assert (code, out) == (2, ""), err
    assert said in err


def test_partial_offload_holds_that_share(model: Path) -> None:
    data = json.loads(
        gpuprov(
            "fit", str(model), "--ctx", "8192", "--n-gpu-layers", "11", "--gpu", "x:8192", "--json"
        )[1]
    )
    part = data["per_gpu"]
    assert part["offloaded_layers"] == "11/33"
    # -ngl 11 of 33: the output layer and the last 10 repeating layers (src/llama-model.cpp:
    # i_gpu_start = n_layer + 1 - n_gpu_layers, as llama.cpp 0c1e57098 placed them on an H100,
    # tests/test_vram_dry_run.py); this header has no output.weight, so token_embd serves as the
    # output there while the input copy stays in RAM. KV follows the 10 repeating layers.
    embd = 128256 * 4096 * 2 / 2**20
    assert part["weights_mib"] == pytest.approx((6 * 1024 - embd) * 10 / 32 + embd)
    assert part["kv_mib"] == pytest.approx(1024 * 10 / 32)


def test_experts_in_ram_leave_the_gpu(tmp_path: Path) -> None:
    """--n-cpu-moe all (llama-server's --cpu-moe) and --n-cpu-moe N: the experts of those layers
    stay in RAM (common/arg.cpp); a value that is neither is bad input."""

    def moe(w: gguf.GGUFWriter) -> None:
        llama_8b(w)
        w.add_expert_count(8)
        w.add_expert_used_count(2)

    path = tmp_path / "moe.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    moe(w)
    w.add_tensor_info("token_embd.weight", (128256, 4096), np.dtype(np.float16), EMBD_BYTES)
    w.add_tensor_info("output.weight", (128256, 4096), np.dtype(np.float16), EMBD_BYTES)
    for layer in range(32):
        w.add_tensor_info(
            f"blk.{layer}.ffn_up_exps.weight", (8, 1024, 4096), np.dtype(np.float16), 64 * 2**20
        )
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()

    def weights(*extra: str) -> float:
        code, out, _ = gpuprov("fit", str(path), "--ctx", "4096", "--json", *extra)
        assert code == 0, out
        return float(json.loads(out)["per_gpu"]["weights_mib"])

    embd = EMBD_BYTES / 2**20
    assert weights() == pytest.approx(embd + 32 * 64)  # output and every expert
    assert weights("--n-cpu-moe", "all") == pytest.approx(embd)
    assert weights("--n-cpu-moe", "30") == pytest.approx(embd + 2 * 64)
    code, _, err = gpuprov("fit", str(path), "--ctx", "4096", "--n-cpu-moe", "some")
    assert code == 2 and "--n-cpu-moe: 'some'" in err


def test_the_settings_line_names_experts_kept_in_ram(model: Path) -> None:
    code, out, _ = gpuprov("fit", str(model), "--ctx", "4096", "--n-cpu-moe", "all")
    assert code == 0 and "--n-cpu-moe all" in out.splitlines()[1]
    code, out, _ = gpuprov("fit", str(model), "--ctx", "4096")
    assert "--n-cpu-moe" not in out


# --- the projector and the draft model -------------------------------------------------------


@pytest.fixture
def projector(tmp_path: Path) -> Path:
    from tests.test_vram_mmproj import GEMMA3, mmproj

    path = tmp_path / "mmproj-gemma3.gguf"
    mmproj(path, "gemma3", mib=811.79, **GEMMA3)
    return path


@pytest.fixture
def draft(tmp_path: Path) -> Path:
    from tests.test_vram_mmproj import qwen2_draft

    path = tmp_path / "draft.gguf"
    qwen2_draft(path)
    return path


def _per_gpu(*argv: str) -> dict[str, Any]:
    code, out, err = gpuprov("fit", *argv, "--gpu", "H100", "--json")
    assert code == 0, err
    return dict(json.loads(out)["per_gpu"])


def test_a_projector_is_a_line_of_its_own_and_counts_in_the_total(
    model: Path, projector: Path
) -> None:
    code, out, _ = gpuprov(
        "fit", str(model), "--ctx", "8192", "--mmproj", str(projector), "--gpu", "RTX 4090"
    )
    assert code == 0
    assert "  mmproj            933.0 MiB  weights 811.8 MiB + CLIP compute 121.2 MiB" in out
    alone = _per_gpu(str(model), "--ctx", "8192")
    both = _per_gpu(str(model), "--ctx", "8192", "--mmproj", str(projector))
    assert alone["mmproj"] is None
    assert both["mmproj"]["weights_mib"] == pytest.approx(811.79, abs=0.01)
    assert both["mmproj"]["not_counted"] is None
    assert both["total_mib"] == pytest.approx(alone["total_mib"] + both["mmproj"]["total_mib"])


def test_a_projector_kept_in_ram_adds_nothing(model: Path, projector: Path) -> None:
    alone = _per_gpu(str(model), "--ctx", "8192")
    kept = _per_gpu(str(model), "--ctx", "8192", "--mmproj", str(projector), "--no-mmproj-offload")
    assert kept["mmproj"]["total_mib"] == 0 and "kept in RAM" in kept["mmproj"]["how"]
    assert kept["total_mib"] == pytest.approx(alone["total_mib"])


def test_a_projector_sits_on_the_first_gpu(model: Path, projector: Path) -> None:
    argv = ("fit", str(model), "--ctx", "8192", "--mmproj", str(projector))
    code, out, _ = gpuprov(*argv, "--gpu", "RTX 4090", "--gpu", "RTX 4090", "--json")
    data = json.loads(out)
    first, second = (g["held_mib"] for g in data["gpus"])
    assert code == 0 and first - second == pytest.approx(data["per_gpu"]["mmproj"]["total_mib"])
    code, out, _ = gpuprov(*argv, "--gpu", "RTX 4090", "--gpu", "RTX 4090")
    assert "(gemma3), GPU 0 only" in out


def test_a_draft_model_is_a_line_of_its_own_and_counts_in_the_total(
    model: Path, draft: Path
) -> None:
    code, out, _ = gpuprov(
        "fit", str(model), "--ctx", "16384", "--model-draft", str(draft), "--gpu", "RTX 4090"
    )
    assert code == 0 and "  draft model " in out and "(16384 ctx, f16/f16)" in out
    alone = _per_gpu(str(model), "--ctx", "16384")
    both = _per_gpu(str(model), "--ctx", "16384", "--model-draft", str(draft))
    part = both["draft"]
    assert part["kv_mib"] == pytest.approx(24 * 16384 * 128 * 4 / 2**20)
    assert both["total_mib"] == pytest.approx(alone["total_mib"] + part["total_mib"])
    typed = _per_gpu(
        str(model), "--ctx", "16384", "--model-draft", str(draft), "--cache-type-k-draft", "q8_0"
    )["draft"]
    assert typed["kv_mib"] == pytest.approx(24 * 16384 * 128 * (34 / 32 + 2) / 2**20)
    kept = _per_gpu(
        str(model), "--ctx", "16384", "--model-draft", str(draft), "--n-gpu-layers-draft", "0"
    )["draft"]
    assert (kept["weights_mib"], kept["kv_mib"]) == (0, 0)


def test_the_json_of_both_follows_the_schema(model: Path, projector: Path, draft: Path) -> None:
    from checks.reporting import schema

    jsonschema = importlib.import_module("jsonschema")  # a test dependency without type stubs

    code, out, _ = gpuprov(
        "fit",
        str(model),
        "--ctx",
        "8192",
        "--mmproj",
        str(projector),
        "--model-draft",
        str(draft),
        "--gpu",
        "H100",
        "--json",
    )
    data = json.loads(out)
    assert code == 0
    jsonschema.validate(data, schema.committed("fit"))
    settings = data["settings"]
    assert (settings["mmproj"], settings["model_draft"]) == (str(projector), str(draft))
    assert settings["mmproj_offload"] is True and settings["draft_cache_type_k"] == "f16"


def test_bad_projector_or_draft_input_exits_2(model: Path, projector: Path, tmp_path: Path) -> None:
    cases = [
        (["--mmproj", str(model)], "not a multimodal projector (architecture llama)"),
        (["--mmproj", str(tmp_path / "none.gguf")], "none.gguf: no such file"),
        (["--model-draft", str(projector)], "a multimodal projector, not a model"),
        (["--model-draft", str(model), "--cache-type-k-draft", "q3_k"], "--cache-type-k-draft"),
        (["--model-draft", str(model), "--n-gpu-layers-draft", "most"], "a number, all or auto"),
    ]
    for args, said in cases:
        code, out, err = gpuprov("fit", str(model), "--ctx", "8192", "--gpu", "H100", *args)
        assert (code, out) == (2, ""), args
        assert said in err, err
    code, _, err = gpuprov("fit", str(projector), "--ctx", "8192", "--gpu", "H100")
    assert code == 2 and "a multimodal projector, not a model (give it with --mmproj)" in err
