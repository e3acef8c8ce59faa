"""Hypothesis strategies for the input people paste and attackers write, shared by every property
test, and the two run lengths: a bounded run in the normal suite, a long one behind
GPUPROV_FUZZ=long (e.g. `GPUPROV_FUZZ=long .venv/bin/pytest tests -k property`)."""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

settings.register_profile(
    "bounded", max_examples=60, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.register_profile(
    "long", max_examples=4000, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.load_profile("long" if os.environ.get("GPUPROV_FUZZ") == "long" else "bounded")

# Digits that are not ASCII: Arabic-Indic, Extended Arabic-Indic, Devanagari, fullwidth,
# superscripts, and a mathematical bold digit; int() reads some of them, Version() none.
UNICODE_DIGITS = "٠١٢٣٤٥٦٧٨٩۰۵९０５⁰¹²³𝟓"
CONTROL = "".join(chr(c) for c in (*range(0, 32), 127)) + "\x85\u2028\u2029"
MARKUP = ("[/]", "[bold]", "[/dim]", "[link=x]", "[red]x[/red]", "\\[", "[")
ESCAPES = ("\x1b[31m", "\x1b]0;title\x07", "\x1b[2J", "\x9b31m", "\x1b[?1049h")

text_pieces = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=UNICODE_DIGITS + ".-+ ", max_size=20),
    st.text(alphabet=CONTROL, max_size=8),
    st.sampled_from(MARKUP + ESCAPES),
    st.integers(min_value=0, max_value=5000).map(lambda n: " " * n),
    st.integers(min_value=0, max_value=5000).map(lambda n: "9" * n),
    st.sampled_from(("null", "None", "N/A", "[N/A]", "[Not Supported]", "", "\ufeff")),
)


def hostile_text(max_pieces: int = 12) -> st.SearchStrategy[str]:
    """Text made of hostile pieces: odd digits, control characters, markup, terminal escapes,
    long whitespace and digit runs, placeholders."""
    return st.lists(text_pieces, max_size=max_pieces).map("".join)


def hostile_lines(real: list[str]) -> st.SearchStrategy[str]:
    """Real recorded lines with hostile pieces spliced in: what a parser must survive."""
    line = st.one_of(st.sampled_from(real), hostile_text()) if real else hostile_text()
    return st.lists(line, max_size=30).map("\n".join)


def nested_json(depth: int) -> str:
    """JSON nested `depth` deep: [[[[...]]]]."""
    return "[" * depth + "]" * depth


json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | hostile_text(4),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(hostile_text(3), children, max_size=4)
    ),
    max_leaves=20,
)
