"""Reading what people hand gpuprov: files that never block, JSON that never recurses too deep.

A FIFO with no writer blocks open() forever, and deeply nested JSON ends json.loads in a
RecursionError; both become an InputError (a ValueError) that the caller reports as bad input.
"""

from __future__ import annotations

import io
import json
import os
import stat
import time
import typing
from collections.abc import Iterable
from typing import Any, BinaryIO

# Deeper than any output gpuprov reads (docker inspect, config.json, a facts file) nests.
MAX_JSON_DEPTH = 64
WRITER_WAIT = 2.0  # seconds a FIFO may wait for its writer to open it


class InputError(ValueError):
    """Input that cannot be used; the message says why."""


def open_input(path: str) -> BinaryIO:
    """Open a file or a pipe (a FIFO, or `<(command)`) for reading, never blocking on the open.

    A FIFO that nothing writes to, devices, sockets and directories are refused with an OSError,
    as a missing file is.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
            kind = "a directory" if stat.S_ISDIR(mode) else "a device or socket"
            raise OSError(f"{kind}, not a file")
        first = _first_byte(fd) if stat.S_ISFIFO(mode) else b""
        os.set_blocking(fd, True)  # the open no longer waits; reads wait for the writer
        raw = os.fdopen(fd, "rb", buffering=0)
        stream = io.BufferedReader(_Prefixed(first, raw)) if first else io.BufferedReader(raw)
        return typing.cast(BinaryIO, stream)
    except BaseException:
        os.close(fd)
        raise


def _first_byte(fd: int) -> bytes:
    """The FIFO's first byte (b"" while a writer has written nothing yet); a FIFO with no writer
    within WRITER_WAIT seconds is refused, so a writer started just after gpuprov still counts."""
    deadline = time.monotonic() + WRITER_WAIT
    while True:
        try:
            first = os.read(fd, 1)
        except BlockingIOError:  # a writer is there, with nothing written yet
            return b""
        if first:
            return first
        if time.monotonic() >= deadline:
            raise OSError("a pipe with no writer")
        time.sleep(0.05)


class _Prefixed(io.RawIOBase):
    """A raw stream that reads `head` before the rest of `rest`: a pipe's byte read to see if
    anything writes to it."""

    def __init__(self, head: bytes, rest: io.RawIOBase) -> None:
        self._head, self._rest = head, rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        return self._rest.readinto(buffer)

    def close(self) -> None:
        self._rest.close()
        super().close()


def loads(text: str | bytes) -> Any:
    """json.loads, refusing JSON nested deeper than MAX_JSON_DEPTH with an InputError."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise InputError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    _check_depth(value)
    return value


def raw_decode(text: str, start: int = 0) -> tuple[Any, int]:
    """json.JSONDecoder().raw_decode with the depth bound of `loads`."""
    try:
        value, end = json.JSONDecoder().raw_decode(text, start)
    except RecursionError:
        raise InputError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    _check_depth(value)
    return value, end


def _check_depth(value: Any) -> None:
    """Raise an InputError when arrays and objects nest deeper than MAX_JSON_DEPTH."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[Any] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > MAX_JSON_DEPTH:
            raise InputError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
        stack.extend((child, depth + 1) for child in children)
