"""Every signature's own words, pasted bare: an issue title or a quote often keeps only the
message ("an illegal memory access was encountered", "libcublasLt.so.12: cannot open shared object
file") without the error word or prefix of the line it came from. For each signature that needs
no context line, the text its pattern matched in each of its real match fixtures must, alone on a
line, give that signature: the prefilter's anchors must reach it and line cleaning must keep it.
"""

from __future__ import annotations

import io

import pytest

from checks.logs import logscan
from tests.conftest import FIXTURES

SIGNATURES = logscan.signatures()


def _cases() -> list[object]:
    cases: list[object] = []
    for sig in SIGNATURES:
        folder = FIXTURES / "signatures" / sig.id
        if sig.context is not None or not folder.is_dir():
            continue
        for path in sorted(folder.glob("match_*")):
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
            found = {m.group(0) for line in lines if (m := sig.pattern.search(logscan.clean(line)))}
            cases += [pytest.param(sig.id, bare, id=f"{sig.id}/{path.name}") for bare in found]
    return cases


@pytest.mark.parametrize(("signature_id", "bare"), _cases())
def test_a_signatures_words_alone_give_it(signature_id: str, bare: str) -> None:
    found = logscan.scan(io.BytesIO((bare + "\n").encode()), SIGNATURES, use_grep=False)
    assert signature_id in found.hits, bare
