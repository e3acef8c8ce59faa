"""Quoting for values that reach systemd unit files, EnvironmentFiles and shells.

Shared by both engines: these are Jinja filters of provision.filters, which pyinfra renders
templates with and Ansible loads through its filter plugin.
"""

from __future__ import annotations

import shlex


class QuotingError(ValueError):
    """A value cannot be written safely (control characters)."""


def _plain(value: object) -> str:
    text = str(value)
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise QuotingError(f"control character in {text!r}")
    return text


def systemd_quote(value: object) -> str:
    """One ExecStart argument: double-quoted, with specifiers (%) and variables ($) escaped."""
    text = _plain(value).replace("\\", "\\\\").replace('"', '\\"')
    return '"' + text.replace("%", "%%").replace("$", "$$") + '"'


def systemd_env(value: object) -> str:
    """A value for an EnvironmentFile line (KEY=<this>); no expansion happens there."""
    return '"' + _plain(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def systemd_path(value: object) -> str:
    """A path in a unit setting that takes a path: specifiers escaped, no spaces allowed."""
    text = _plain(value)
    if not text.startswith("/") or any(c.isspace() for c in text):
        raise QuotingError(f"not an absolute path without spaces: {text!r}")
    return text.replace("%", "%%")


def shell_quote(value: object) -> str:
    """One word for a POSIX shell."""
    return shlex.quote(_plain(value))


FILTERS = {
    "systemd_quote": systemd_quote,
    "systemd_env": systemd_env,
    "systemd_path": systemd_path,
    "shell_quote": shell_quote,
}
