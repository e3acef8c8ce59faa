"""Reading one value from a host's variables: each reader checks it or raises StackError.

`where` places a key inside a list entry ("vllm_replicas[0]"), so the error names the full field.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Any

# Patterns are whole-value: use them with fullmatch (a `$` would let a trailing newline through).
NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,40}")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SAFE_PATH = re.compile(r"/[A-Za-z0-9._/+@-]+")
ADDRESS = re.compile(r"[0-9.]+|[0-9A-Fa-f:]+|localhost")
# Control characters (C0, DEL, C1), lone surrogates (no UTF-8 for them: a file write fails) and
# the line and paragraph separators that Python's splitlines() breaks lines at.
UNWRITABLE = ("Cc", "Cs", "Zl", "Zp")


class StackError(ValueError):
    """A value in a host's stack is wrong; ``field`` names it."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def unwritable(value: str) -> bool:
    """Whether `value` holds a character no unit, env file or TSV line may hold (UNWRITABLE)."""
    return any(unicodedata.category(c) in UNWRITABLE for c in value)


def field(where: str, key: str) -> str:
    """The full name of `key` inside `where` (or `key` itself at the top level)."""
    return f"{where}.{key}" if where else key


def text(v: Mapping[str, Any], key: str, where: str = "", empty: bool = False) -> str:
    value = v.get(key, "")
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise StackError(field(where, key), f"must be a string, got {type(value).__name__}")
    if not value and not empty:
        raise StackError(field(where, key), "must not be empty")
    if unwritable(value):
        raise StackError(field(where, key), "must not contain control characters or line breaks")
    return value


def name(v: Mapping[str, Any], key: str, where: str = "") -> str:
    value = text(v, key, where)
    if not NAME.fullmatch(value):
        raise StackError(field(where, key), f"lower-case letters, digits and '-', got {value!r}")
    return value


def env_name(v: Mapping[str, Any], key: str, where: str = "") -> str:
    """The name of an environment variable, or "" when unset."""
    value = text(v, key, where, empty=True)
    if value and not ENV_NAME.fullmatch(value):
        raise StackError(field(where, key), "the name of an environment variable")
    return value


def address(v: Mapping[str, Any], key: str, where: str = "") -> str:
    value = text(v, key, where)
    if not ADDRESS.fullmatch(value):
        raise StackError(field(where, key), f"an IP address, got {value!r}")
    return value


def absolute(v: Mapping[str, Any], key: str, where: str = "") -> str:
    value = text(v, key, where)
    if not value.startswith("/") or "/../" in f"{value}/":
        raise StackError(field(where, key), f"must be an absolute path, got {value!r}")
    return value


def unit_path(v: Mapping[str, Any], key: str) -> str:
    """An absolute path without whitespace: systemd takes such paths unquoted (systemd_path)."""
    value = absolute(v, key)
    if any(c.isspace() for c in value):
        raise StackError(key, f"must not contain spaces, got {value!r}")
    return value


def safe_path(v: Mapping[str, Any], key: str) -> str:
    """An absolute path safe in an ExecStart binary name (systemd unescapes nothing there)."""
    value = unit_path(v, key)
    if not SAFE_PATH.fullmatch(value):
        raise StackError(key, f"letters, digits and ._/+@- only, got {value!r}")
    return value


def integer(v: Mapping[str, Any], key: str, low: int, high: int, where: str = "") -> int:
    value = v.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise StackError(field(where, key), f"must be an integer {low}-{high}, got {value!r}")
    return value


def boolean(v: Mapping[str, Any], key: str, where: str = "") -> bool:
    value = v.get(key)
    if not isinstance(value, bool):
        raise StackError(field(where, key), f"must be true or false, got {value!r}")
    return value


def strings(v: Mapping[str, Any], key: str, where: str = "") -> tuple[str, ...]:
    value = v.get(key) or []
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise StackError(field(where, key), "must be a list of strings")
    if any(unwritable(s) for s in value):
        raise StackError(field(where, key), "must not contain control characters or line breaks")
    return tuple(value)


def choice(v: Mapping[str, Any], key: str, choices: tuple[str, ...]) -> str:
    value = v.get(key)
    if value not in choices:
        raise StackError(key, f"one of {', '.join(choices)}, got {value!r}")
    return str(value)


def unknown(v: Mapping[str, Any], known: set[str], where: str) -> None:
    """Refuse a key of a list entry that is none of `known`."""
    extra = sorted(set(v) - known)
    if extra:
        raise StackError(
            f"{where}.{extra[0]}", f"unknown setting (known: {', '.join(sorted(known))})"
        )
