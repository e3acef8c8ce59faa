"""What a llama-server build accepts: its `--help` read into options, its `--version` read.

`llama-server --help` prints each option as llama.cpp's `common_arg::to_string` writes it: the
option's names (the short ones first, negations last) and value hints, padded to column 40 or on
a line of their own, then the help text indented by 40 columns, ending with "(env: NAME)" when an
environment variable sets the option. A value hint means the option takes a value: llama.cpp has
one constructor per handler, and only those of value handlers take hints (two hints: two values).
Section headers ("----- common params -----") and backend start-up lines are skipped.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from checks.facts.parsers.llamacpp import parse_llamacpp

_ENV = re.compile(r"\(env: ([A-Za-z_][A-Za-z0-9_]*)\)")
_BRACKETS = {"<": ">", "[": "]", "{": "}", "(": ")"}
# llama.cpp's --load-mode value that maps and locks the model, what --mlock did before it.
MMAP_MLOCK = "mmap+mlock"
# How a unit asks any build to lock its model in RAM: llama.cpp reads the variables of the options
# it has (--mlock before --load-mode replaced it, --load-mode after), and command-line arguments
# override them.
MLOCK_ENV = (("LLAMA_ARG_MLOCK", "1"), ("LLAMA_ARG_LOAD_MODE", MMAP_MLOCK))


@dataclass(frozen=True)
class Option:
    """One option: its names (aliases and negations), how many values follow it, its variable."""

    names: tuple[str, ...]
    values: int
    env: str | None = None
    text: str = ""


@dataclass(frozen=True)
class Options:
    """The options a build accepts, as its --help lists them."""

    options: tuple[Option, ...] = ()

    @functools.cached_property
    def _by_name(self) -> dict[str, Option]:
        return {name: o for o in reversed(self.options) for name in o.names}

    def find(self, flag: str) -> Option | None:
        """The option `flag` names; llama.cpp reads `_` as `-` in names starting with `--`."""
        return self._by_name.get(flag.replace("_", "-") if flag.startswith("--") else flag)

    def by_env(self, env: str) -> Option | None:
        return next((o for o in self.options if o.env == env), None)

    def mlock(self) -> bool:
        """Whether the build can lock the model in RAM the way gpuprov asks for it.

        A build with --load-mode reads LLAMA_ARG_LOAD_MODE, which must offer mmap+mlock (the
        first --load-mode builds had only mlock, and refuse an unknown value at start); an older
        build reads LLAMA_ARG_MLOCK (--mlock).
        """
        (mlock, _), (load_mode_env, mode) = MLOCK_ENV
        load_mode = self.by_env(load_mode_env)
        if load_mode is not None:
            return mode in load_mode.text
        return self.by_env(mlock) is not None


def parse_help(text: str) -> Options:
    """The options in `llama-server --help` output; none when it lists none."""
    found: list[Option] = []
    names: tuple[str, ...] = ()
    values = 0
    lines: list[str] = []

    def close() -> None:
        if names:
            joined = " ".join(lines)
            envs = _ENV.findall(joined)
            found.append(Option(names, values, envs[-1] if envs else None, joined))

    for raw in text.splitlines():
        line = raw.rstrip()
        if line.startswith("-") and not line.startswith("-----"):
            head = _head(line)
            close()
            names, values, first = head if head else ((), 0, "")
            lines = [first] if first else []
        elif raw[:1] in (" ", "\t"):  # help text, or a blank line within it
            if names and line:
                lines.append(line.strip())
        else:
            close()
            names, lines = (), []
    close()
    return Options(tuple(found))


def _head(line: str) -> tuple[tuple[str, ...], int, str] | None:
    """(names, number of values, help text on the same line) of an option's first line."""
    names: list[str] = []
    i, n = 0, len(line)
    while i < n and line[i] == "-":
        end = i
        while end < n and not line[end].isspace() and line[end] != ",":
            end += 1
        name = line[i:end]
        if not re.fullmatch(r"--?[A-Za-z0-9][\w.+-]*", name):
            return None
        names.append(name)
        i = end
        if i < n and line[i] == ",":
            i += 1
            while i < n and line[i] == " ":
                i += 1
            continue
        break
    if not names:
        return None
    rest = line[i:]
    if rest.startswith(" ") and not rest.startswith("  "):
        hint, _, text = rest[1:].partition("  ")
        return tuple(names), min(len(_words(hint)), 2), text.strip()
    return tuple(names), 0, rest.strip()


def _words(hint: str) -> list[str]:
    """The value hints in `hint`: spaces inside <>, [], {} or () do not separate hints."""
    words: list[str] = []
    current: list[str] = []
    closing: list[str] = []
    for char in hint:
        if char in _BRACKETS:
            closing.append(_BRACKETS[char])
        elif closing and char == closing[-1]:
            closing.pop()
        elif char == " " and not closing:
            if current:
                words.append("".join(current))
                current = []
            continue
        current.append(char)
    if current:
        words.append("".join(current))
    return words


@dataclass(frozen=True)
class Version:
    """A build's number and commit, from `--version`; None where it does not say (a build from a
    source tarball without git metadata prints build 0 and commit unknown)."""

    build: str | None = None
    commit: str | None = None

    def label(self) -> str:
        """ "b7895 (a1b2c3d)", "b7895", or "" when the build number is unknown."""
        if self.build is None:
            return ""
        return f"b{self.build} ({self.commit})" if self.commit else f"b{self.build}"


def parse_version(text: str) -> Version:
    """`llama-server --version`: "version: 4621 (6eecde3c)", or since the versioned releases
    "version: 0.4.1-dev (build 10991, commit 930e2fa59)"; read as the llama.cpp probe reads it."""
    builds = parse_llamacpp(text).llamacpp
    if not builds:
        return Version()
    build = builds[0].version
    return Version(build if build != "0" else None, builds[0].commit)
