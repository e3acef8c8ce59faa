"""Secrets read from this machine's environment, remembered so error messages can mask them."""

from __future__ import annotations

MASK = "<secret>"
_values: set[str] = set()


def remember(value: str) -> str:
    """`value`, remembered as a secret: scrub() masks it from now on."""
    if value:
        _values.add(value)
    return value


def scrub(text: str) -> str:
    """`text` with every secret remembered so far masked (the longest first)."""
    for value in sorted(_values, key=len, reverse=True):
        text = text.replace(value, MASK)
    return text
