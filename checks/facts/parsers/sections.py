"""Probe output in sections, and shell snippets probes share.

A probe that runs several commands prints a marker line before each output:
`### gpuprov:<name> [argument]`. `split` cuts the text at those lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from checks.facts.model import HostFacts, merge

# The argument runs to the end of the line and loses its trailing blanks after: a lazy argument
# before "[ \t]*$" is quadratic in a long run of blanks.
_MARKER = re.compile(r"^### gpuprov:(\S+)(?:[ \t]+(\S.*))?[ \t]*$", re.MULTILINE)

# Site-packages directories of the Python installs a user is likely to run, found by globbing so
# that no interpreter starts (a pyenv shim alone costs a tenth of a second).
SITE_DIRS = r"""site_dirs() {
  for e in "$VIRTUAL_ENV" "$CONDA_PREFIX" "$HOME/.local" /usr /usr/local; do
    [ -n "$e" ] && ls -d "$e"/lib/python3*/site-packages "$e"/lib/python3*/dist-packages
  done
  ls -d /usr/lib/python3/dist-packages "$HOME"/.pyenv/versions/*/lib/python3*/site-packages \
    "$HOME"/*conda3/lib/python3*/site-packages "$HOME"/miniforge3/lib/python3*/site-packages \
    "$HOME"/*conda3/envs/*/lib/python3*/site-packages
  # A venv's python3 links to the base interpreter: its own prefix first, then the link's target.
  # vllm's entry point finds the venv vLLM was installed into when another python3 is first.
  for c in python3 python vllm; do
    p=$(command -v "$c") || continue
    ls -d "${p%/bin/*}"/lib/python3*/site-packages
    r=$(readlink -f "$p") && ls -d "${r%/bin/*}"/lib/python3*/site-packages
  done
} 2>/dev/null"""


@dataclass(frozen=True)
class Section:
    name: str
    argument: str | None
    text: str


def split(text: str) -> list[Section]:
    """The sections of a probe's output, in order; text before the first marker is dropped."""
    markers = list(_MARKER.finditer(text))
    out = []
    for i, marker in enumerate(markers):
        end = markers[i + 1].start() if i + 1 < len(markers) else len(text)
        argument = marker.group(2)
        argument = argument.rstrip(" \t") if argument is not None else None
        out.append(Section(marker.group(1), argument, text[marker.end() : end]))
    return out


def dispatch(text: str, parsers: Mapping[str, Callable[[str], HostFacts]]) -> HostFacts:
    """Parse each section with the parser named for it and merge the fragments."""
    facts = HostFacts()
    for section in split(text):
        parser = parsers.get(section.name)
        if parser is not None:
            merge(facts, parser(section.text))
    return facts
