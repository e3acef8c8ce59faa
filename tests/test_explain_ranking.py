"""Ranking: a cause outranks the symptoms it explains (`explains` in the signatures), whatever
their scores; the relation is checked at load, and held on every real log."""

from __future__ import annotations

import dataclasses
import io
import re
from pathlib import Path

import pytest

from checks.facts.model import HostFacts, from_dict
from checks.logs import explain, logscan
from tests.conftest import FIXTURES

REAL_LOGS = sorted(
    [
        *FIXTURES.glob("corpus/logs/*/*.txt"),
        *FIXTURES.glob("real/*.txt"),
        *FIXTURES.glob("signatures/*/match*.log"),
    ]
)

PTX_THEN_FORWARD = (
    b"CUDA error: the provided PTX was compiled with an unsupported toolchain.\n"
    b"  current device: 0, in function ggml_cuda_compute_forward at ggml/src/ggml-cuda.cu:2326\n"
    b"ggml_cuda_compute_forward: MUL_MAT failed\n"
    b"ggml/src/ggml-cuda.cu:102: CUDA error\n"
)


def _sig(id_: str, explains: tuple[str, ...] = (), specificity: int = 50) -> logscan.Signature:
    return logscan.Signature(
        id=id_,
        rule="LCPP-006",
        pattern=re.compile(id_),
        specificity=specificity,
        message="m",
        fix="f",
        explains=explains,
    )


def test_the_shipped_signatures_load_and_explain_known_ids() -> None:
    sigs = logscan.signatures()
    known = {s.id for s in sigs}
    assert any(s.explains for s in sigs)
    for sig in sigs:
        assert set(sig.explains) <= known, sig.id
        assert sig.id not in sig.explains


@pytest.mark.parametrize(
    ("sigs", "error"),
    [
        ([_sig("a", ("nope",))], "unknown"),
        ([_sig("a", ("a",))], "itself"),
        ([_sig("a", ("b",)), _sig("b", ("c",)), _sig("c", ("a",))], "itself"),
    ],
    ids=["unknown-id", "self", "cycle"],
)
def test_bad_explains_is_refused_at_load(sigs: list[logscan.Signature], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        logscan.check_explains(sigs)


def test_closure_is_transitive() -> None:
    sigs = [_sig("a", ("b",)), _sig("b", ("c",)), _sig("c")]
    closure = logscan.explained_by_closure(sigs)
    assert closure["c"] == {"a", "b"} and closure["b"] == {"a"} and "a" not in closure


def _diagnosis(signature: str, score: int, line: int) -> explain.Diagnosis:
    return explain.Diagnosis(
        rule=signature.upper(),
        severity="error",
        title="t",
        signature=signature,
        score=score,
        message="m",
        cause="c",
        fix="f",
        citations=(),
        evidence=((line, signature),),
        count=1,
    )


def test_rank_puts_a_cause_in_the_place_of_its_best_placed_symptom() -> None:
    symptom, cause, other = _diagnosis("s", 200, 1), _diagnosis("c", 10, 9), _diagnosis("o", 50, 5)
    ranked = explain.rank([symptom, other, cause], {"s": frozenset({"c"})})
    assert [d.signature for d in ranked] == ["c", "s", "o"]
    # Unrelated findings keep their order by score.
    assert explain.rank([symptom, other], {}) == [symptom, other]


def test_ptx_error_outranks_the_ggml_failure_it_causes() -> None:
    scan = logscan.scan(io.BytesIO(PTX_THEN_FORWARD))
    found = [d.signature for d in explain.diagnose(scan)]
    assert found[0] == "ptx-unsupported-toolchain"
    assert "ggml-forward-failed" in found


def test_cause_outranks_symptom_even_when_the_symptom_scores_higher() -> None:
    """Raise the symptom's specificity far above the cause's: the order does not change."""
    sigs = tuple(
        dataclasses.replace(s, specificity=500) if s.id == "ggml-forward-failed" else s
        for s in logscan.signatures()
    )
    scan = logscan.scan(io.BytesIO(PTX_THEN_FORWARD), sigs=sigs)
    diagnoses = explain.diagnose(scan)
    forward = next(d for d in diagnoses if d.signature == "ggml-forward-failed")
    assert diagnoses[0].signature == "ptx-unsupported-toolchain"
    assert forward.score > diagnoses[0].score


def test_jetson_gpu_words_the_ptx_diagnosis_for_jetpack() -> None:
    log = FIXTURES / "corpus/logs/engine/err_ptx-toolchain__ollama-6921_jetson-orin.txt"
    with log.open("rb") as stream:
        scan = logscan.scan(stream)
    host = from_dict(HostFacts, {"gpus": [{"index": 0, "name": "Orin"}]})
    top = explain.diagnose(scan, host=host)[0]
    assert top.signature == "ptx-unsupported-toolchain"
    assert "Jetson" in top.message and "JetPack" in top.fix
    assert "Jetson" not in explain.diagnose(scan)[0].message


@pytest.mark.parametrize(
    ("devices", "rule", "words"),
    [
        (["NVIDIA A100-SXM4-80GB, compute capability 8.0"], "LCPP-013", "the regression"),
        (["NVIDIA GeForce RTX 2080 Ti, compute capability 7.5"], "ARCH-002", "7.5"),
        (
            [
                "NVIDIA GeForce RTX 3090, compute capability 8.6",
                "NVIDIA GeForce RTX 2080 Ti, compute capability 7.5",
            ],
            "ARCH-002",
            "compute capabilities: 8.6 7.5",
        ),
    ],
)
def test_the_arch_abort_is_the_regression_only_when_no_gpu_is_turing(
    devices: list[str], rule: str, words: str
) -> None:
    """ggml's "<= 750" abort (llama.cpp #15589): a Turing card anywhere in the list means the
    build lacks sm_75 kernels for it, not the regression (the first device is not enough)."""
    lines = [f"ggml_cuda_init: found {len(devices)} CUDA devices:"]
    lines += [f"  Device {i}: {d}, VMM: yes" for i, d in enumerate(devices)]
    lines += ["/llama.cpp/ggml/src/ggml-cuda/common.cuh:112: ggml was not compiled with any CUDA"
              " arch <= 750"]  # fmt: skip
    scan = logscan.scan(io.BytesIO(("\n".join(lines) + "\n").encode()))
    top = explain.diagnose(scan)[0]
    assert (top.rule, top.signature) == (rule, "ggml-arch-check-regression")
    assert words in top.message


@pytest.mark.parametrize("path", REAL_LOGS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_no_finding_comes_before_one_that_explains_it(path: Path) -> None:
    closure = logscan.explained_by_closure(logscan.signatures())
    with path.open("rb") as stream:
        diagnoses = explain.diagnose(logscan.scan(stream))
    for i, diagnosis in enumerate(diagnoses):
        later = {d.signature for d in diagnoses[i + 1 :]}
        assert not closure.get(diagnosis.signature, frozenset()) & later, (
            diagnosis.signature,
            [d.signature for d in diagnoses],
        )
