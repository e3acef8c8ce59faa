"""A llama-server command line as facts: its arguments read the way llama.cpp reads them.

llama.cpp walks argv in order: every argument must name an option, which takes the next
argument(s) as its value; it reads `_` as `-` in names that start with `--`, refuses
`--ctx-size=4096` (the whole argument is not an option's name), and keeps the last of a repeated
flag. A flag's arity comes from the build's --help when it was read, else from FIELDS (the
settings modelled here, with every name llama.cpp has given them), else an argument that is not
a flag is the value of the one before it. `-fa` alone is the switch of older builds (on); newer
ones take on|off|auto. `--flag=value` is read as meant, and reported as refused against a build.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from checks.facts.model import LlamaServer
from checks.services.llama_server_help import Options

FIELDS: dict[str, tuple[str, ...]] = {
    "model": ("-m", "--model"),
    "mmproj": ("-mm", "--mmproj"),
    "model_draft": ("-md", "--model-draft", "--spec-draft-model"),
    "ctx_size": ("-c", "--ctx-size"),
    "parallel": ("-np", "--parallel"),
    "n_gpu_layers": ("-ngl", "--gpu-layers", "--n-gpu-layers"),
    "flash_attn": ("-fa", "--flash-attn"),
    "cache_type_k": ("-ctk", "--cache-type-k"),
    "cache_type_v": ("-ctv", "--cache-type-v"),
}
_BY_NAME = {name: field for field, names in FIELDS.items() for name in names}
# The files a server reads at start, by the LlamaServer field naming them, as messages call them.
FILES = (("model", "model"), ("mmproj", "mmproj"), ("model_draft", "draft model"))
# llama.cpp's is_truthy / is_falsey / is_autoy, as --flash-attn reads its value.
FLASH_ATTN = {
    **dict.fromkeys(("on", "enabled", "true", "1"), "on"),
    **dict.fromkeys(("off", "disabled", "false", "0"), "off"),
    **dict.fromkeys(("auto", "-1"), "auto"),
}
_NUMBER = re.compile(r"-\d+(?:\.\d+)?")
_INT = re.compile(r"-?\d{1,9}")


def is_flag(token: str) -> bool:
    """An argument naming an option: a dash and more, not a negative number."""
    return token.startswith("-") and len(token) > 1 and not _NUMBER.fullmatch(token)


def server(
    name: str,
    argv: Sequence[str],
    options: Options | None = None,
    mlock: bool | None = None,
) -> LlamaServer:
    """The profile `name` running llama-server with `argv` (what follows the binary); `options`,
    the build's --help when it was read, sets arities and which arguments it refuses."""
    args = list(argv)
    found = settings(args, options)
    flash = found.get("flash_attn")
    return LlamaServer(
        name=name,
        argv=args,
        model=found.get("model"),
        mmproj=found.get("mmproj"),
        model_draft=found.get("model_draft"),
        ctx_size=_int(found.get("ctx_size")),
        parallel=_int(found.get("parallel")),
        n_gpu_layers=found.get("n_gpu_layers"),
        flash_attn=FLASH_ATTN.get(flash.lower(), flash) if flash is not None else None,
        cache_type_k=_lower(found.get("cache_type_k")),
        cache_type_v=_lower(found.get("cache_type_v")),
        mlock=mlock,
        rejected=refused(args, options) if options is not None and options.options else None,
        mlock_supported=options.mlock() if options is not None and options.options else None,
    )


def settings(argv: Sequence[str], options: Options | None = None) -> dict[str, str]:
    """The last value of each modelled flag in `argv` (FIELDS' keys)."""
    found: dict[str, str] = {}
    i, n = 0, len(argv)
    while i < n:
        token = argv[i]
        i += 1
        if not is_flag(token):
            continue
        flag, eq, inline = token.partition("=")
        option = options.find(flag) if options is not None else None
        field = _field(flag, option.names if option else ())
        if eq:
            value: str | None = inline
        elif option is not None and field != "flash_attn":
            value = " ".join(argv[i : i + option.values]) if option.values else None
            i += option.values
        elif field == "flash_attn":
            takes = option.values if option is not None else None
            value, i = _flash_attn(argv, i, takes)
        elif field is not None or (i < n and not is_flag(argv[i])):
            value = argv[i] if i < n else None
            i += 1
        else:
            value = None
        if field is not None and value is not None:
            found[field] = value
    return found


def refused(argv: Sequence[str], options: Options) -> list[str]:
    """The arguments of `argv` the build whose --help gave `options` refuses, each worded with
    why when the reason is not plain: llama.cpp stops at the first; all are listed here."""
    out: list[str] = []
    i, n = 0, len(argv)
    previous: str | None = None
    while i < n:
        token = argv[i]
        i += 1
        option = options.find(token)
        if option is not None:
            if i + option.values > n:
                out.append(f"{token} without its value")
                break
            i += option.values
            previous = token if option.values == 0 else None
            continue
        flag, eq, value = token.partition("=")
        if eq and is_flag(flag) and options.find(flag) is not None:
            out.append(f"{token} (llama.cpp takes the value as the next argument: {flag} {value})")
        elif not is_flag(token) and previous is not None:
            out.append(f"{token} (after {previous}, which takes no value in this build)")
        else:
            out.append(token)
            if is_flag(token) and not eq and i < n and not is_flag(argv[i]):
                i += 1  # its value: llama.cpp never gets that far
        previous = None
    return out


def _field(flag: str, names: Sequence[str]) -> str | None:
    """The modelled setting `flag` sets, by any of its names or those its --help lists."""
    normal = flag.replace("_", "-") if flag.startswith("--") else flag
    for name in (normal, *names):
        if name in _BY_NAME:
            return _BY_NAME[name]
    return None


def _flash_attn(argv: Sequence[str], i: int, takes: int | None) -> tuple[str | None, int]:
    """--flash-attn's value and the next index: a switch (on) where the build says it takes no
    value, or where it is unknown and the next argument is not one of its values."""
    if takes == 0:
        return "on", i
    if i < len(argv) and (takes or argv[i].lower() in FLASH_ATTN):
        return argv[i], i + 1
    return ("on", i) if takes is None else (None, i)


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and _INT.fullmatch(value.strip()) else None


def _lower(value: str | None) -> str | None:
    return value.strip().lower() if value is not None else None
