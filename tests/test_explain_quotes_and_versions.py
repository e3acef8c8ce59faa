"""Typographic quotes in pasted logs, and which TensorRT version an engine mismatch names."""

from __future__ import annotations

import io

from checks.logs import explain, logscan


def test_clean_makes_typographic_quotes_plain() -> None:
    line = (
        "NVIDIA-SMI has failed because it couldn\u2018t reach \u201cnvidia\u201d or it\u2019s gone"
    )
    assert (
        logscan.clean(line)
        == "NVIDIA-SMI has failed because it couldn't reach \"nvidia\" or it's gone"
    )


def test_tensorrt_mismatch_names_the_engine_and_runtime_versions() -> None:
    text = (
        "[TRT] [E] 6: The engine plan file is not compatible with this version of TensorRT, "
        "expecting library version 5.1.6 got 5.0.6, please rebuild.\n"
    )
    found = explain.diagnose(logscan.scan(io.BytesIO(text.encode()), use_grep=False))
    assert found[0].signature == "tensorrt-engine-version-mismatch"
    assert "built with TensorRT 5.0.6" in found[0].message
    assert "loads TensorRT 5.1.6" in found[0].message
