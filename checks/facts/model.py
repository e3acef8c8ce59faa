"""What is true of one host: the facts every probe and parser fills in and every rule reads.

A field left as None is unknown. Parsers return a partial HostFacts (a fragment); fragments from
several probes or pasted files merge into one host with `merge`.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

FACTS_SCHEMA_VERSION = 1


@dataclass
class Gpu:
    """One GPU. `compute_capability` is "major.minor" (e.g. "8.6")."""

    index: int | None = None
    name: str | None = None
    pci_bus_id: str | None = None
    uuid: str | None = None
    serial: str | None = None
    compute_capability: str | None = None
    memory_total_mib: int | None = None
    brand: str | None = None
    brand_class: str | None = None
    architecture: str | None = None
    mig_mode: str | None = None
    persistence_mode: str | None = None
    pci_device_id: str | None = None  # vendor:device as lspci -nn prints it ("10de:2335")

    def key(self) -> str | None:
        """Identity used when merging: bus id, then uuid, then index."""
        if self.pci_bus_id:
            return "bus:" + normalise_bus_id(self.pci_bus_id)
        if self.uuid:
            return "uuid:" + self.uuid
        if self.index is not None:
            return f"index:{self.index}"
        return None


@dataclass
class Driver:
    """The NVIDIA driver: userspace, the loaded kernel module, and what failed to talk to it."""

    version: str | None = None
    cuda_version: str | None = None
    kernel_module_version: str | None = None
    kernel_module_flavour: str | None = None
    nvml_library_version: str | None = None
    nvml_error: str | None = None
    smi_error: str | None = None
    persistenced_running: bool | None = None


@dataclass
class KernelModules:
    """Kernel modules: what is loaded and what the installed nvidia module declares."""

    loaded: list[str] | None = None
    nvidia_license: str | None = None
    nvidia_signer: str | None = None
    nvidia_version: str | None = None


@dataclass
class System:
    """Operating system, kernel, CPU architecture, C library, firmware."""

    hostname: str | None = None
    os_id: str | None = None
    os_version: str | None = None
    os_pretty: str | None = None
    kernel_release: str | None = None
    machine: str | None = None
    glibc: str | None = None
    secure_boot: bool | None = None
    l4t_release: str | None = None  # Jetson Linux (L4T), from /etc/nv_tegra_release: "38.2.0"
    jetpack_release: str | None = None  # JetPack, where the text names it: "6.2"
    gcc_version: str | None = None  # the GNU C/C++ compiler nvcc uses by default ("16.1.1")


@dataclass
class Toolkit:
    """One CUDA toolkit (an nvcc). `version` is nvcc's V-number, `release` the X.Y, and `update`
    the toolkit's own version from its version.json (13.2.2), which nvcc does not print."""

    path: str | None = None
    version: str | None = None
    release: str | None = None
    update: str | None = None
    gpu_archs: list[str] | None = None
    source: str | None = None

    def key(self) -> str | None:
        return self.path or self.version


@dataclass
class CompatLibrary:
    """A CUDA forward-compatibility libcuda (cuda-compat package or a compat/ directory)."""

    path: str | None = None
    driver_version: str | None = None
    package: str | None = None
    on_library_path: bool | None = None

    def key(self) -> str | None:
        return self.path or self.package


@dataclass
class Docker:
    """The Docker client and daemon as `docker info` reports them."""

    client_version: str | None = None
    server_version: str | None = None
    server_error: str | None = None
    runtimes: list[str] | None = None
    default_runtime: str | None = None
    cdi_spec_dirs: list[str] | None = None
    cdi_devices: list[str] | None = None
    rootless: bool | None = None
    cgroup_driver: str | None = None
    cgroup_version: str | None = None


@dataclass
class ContainerImage:
    """A container image and the CUDA it was built for, as its environment states it.

    How the NVIDIA Container Toolkit and the image's entrypoint act on these (the requirement it
    enforces, the compat libcuda it loads) is judged in checks/matrix/images.py.
    """

    ref: str | None = None
    cuda_version: str | None = None
    require_cuda: str | None = None
    compat_driver_version: str | None = None
    tags: list[str] | None = None  # every tag the image carries (RepoTags)
    disable_require: bool | None = None  # NVIDIA_DISABLE_REQUIRE set true: the toolkit skips it
    compat_setting: str | None = None  # VLLM_ENABLE_CUDA_COMPATIBILITY as the image sets it
    source: str | None = None  # where the config was read: "docker image inspect", "registry ..."

    def key(self) -> str | None:
        return self.ref


@dataclass
class Containers:
    """Container engines and the NVIDIA Container Toolkit."""

    docker: Docker | None = None
    podman_version: str | None = None
    toolkit_version: str | None = None
    container_cli_version: str | None = None
    runtime_version: str | None = None  # `nvidia-container-runtime --version`
    runtime_hook: bool | None = None
    cdi_specs: list[str] | None = None
    # nvidia-cdi-refresh.service (toolkit >= 1.18): its ActiveState ("failed", "active",
    # "inactive", ...), "absent" where no such unit is installed.
    cdi_refresh: str | None = None
    images: list[ContainerImage] = field(default_factory=list)


@dataclass
class PythonPackage:
    """An installed Python distribution, read from its metadata, never imported."""

    name: str | None = None
    version: str | None = None
    location: str | None = None
    cuda_version: str | None = None
    cuda_archs: list[str] | None = None

    def key(self) -> str | None:
        if self.name is None:
            return None
        return f"{self.name}@{self.location}" if self.location else self.name


@dataclass
class LlamaCppBuild:
    """A llama.cpp build: its version and the CUDA architectures it was compiled for.

    `cuda_archs` are as system_info prints them ("890", "1200"); `cmake_cuda_architectures` is the
    CMake list it was configured with ("86;89;120a").
    """

    path: str | None = None
    version: str | None = None
    commit: str | None = None
    cuda: bool | None = None
    cuda_archs: list[str] | None = None
    cmake_cuda_architectures: str | None = None
    cuda_compiler_version: str | None = None
    cuda_toolkit_update: str | None = None  # the toolkit's own version (13.2.2), where known
    compression_mode: str | None = None
    blackwell_native_fp4: bool | None = None

    def key(self) -> str | None:
        return self.path or (f"version:{self.version}" if self.version else None)


@dataclass
class VllmService:
    """A planned or running `vllm serve` (one replica): its image, arguments and model.

    `argv` is what follows the image. The settings below it are parsed from `argv`: a value flag
    it does not set stays None (the release's default applies), a switch it does not give is
    False (None when a `--config` file may set it). `hybrid` (attention plus Mamba or
    linear-attention layers) and `moe` come from the model's config.json, or from its name when
    `model_guessed`.
    """

    name: str | None = None
    image: str | None = None
    version: str | None = None
    argv: list[str] = field(default_factory=list)
    model: str | None = None
    architectures: list[str] | None = None
    layer_types: list[str] | None = None
    hybrid: bool | None = None
    moe: bool | None = None
    model_guessed: bool = False
    kv_cache_dtype: str | None = None
    max_num_seqs: int | None = None
    gpu_memory_utilization: float | None = None
    enforce_eager: bool | None = None
    cudagraph_mode: str | None = None
    speculative_method: str | None = None
    tensor_parallel_size: int | None = None
    expert_parallel: bool | None = None
    gpus: list[int] | None = None  # the GPU indices the replica is given
    env: dict[str, str] | None = None  # its tuning variables (NCCL_*, CUDA_*, ...), no secret

    def key(self) -> str | None:
        return self.name


@dataclass
class LlamaServer:
    """A planned llama-server profile: its command line, the settings read from it, its build.

    `argv` is what follows the binary: the profile's settings, then its extra_args. The settings
    below it are read from `argv` as llama.cpp reads it (the last occurrence wins); one `argv`
    does not set stays None. `mlock` is the profile's mlock setting, which reaches llama.cpp
    through the environment. `build` names the llama-server whose --help the gate read on the
    host, `build_planned` whether that is the planned build itself; `rejected` lists what of
    `argv` it refuses and `mlock_supported` whether it can lock the model in RAM (both None
    when no --help was read). `missing_files` lists the model, mmproj and draft model paths the
    host said it cannot read (None when none was tested).
    """

    name: str | None = None
    argv: list[str] = field(default_factory=list)
    model: str | None = None
    mmproj: str | None = None
    model_draft: str | None = None
    ctx_size: int | None = None
    parallel: int | None = None
    n_gpu_layers: str | None = None
    flash_attn: str | None = None
    cache_type_k: str | None = None
    cache_type_v: str | None = None
    mlock: bool | None = None
    build: str | None = None
    build_planned: bool | None = None
    rejected: list[str] | None = None
    mlock_supported: bool | None = None
    missing_files: list[str] | None = None

    def key(self) -> str | None:
        return self.name


@dataclass
class ProbeResult:
    """How one probe or input went: ok, absent (tool not there), failed, or unparsed."""

    name: str
    status: str
    detail: str | None = None

    def key(self) -> str | None:
        return f"{self.name}:{self.status}:{self.detail}"


@dataclass
class HostFacts:
    """Everything known about one host. `sources` names where the facts came from."""

    schema_version: int = FACTS_SCHEMA_VERSION
    sources: list[str] = field(default_factory=list)
    system: System = field(default_factory=System)
    driver: Driver = field(default_factory=Driver)
    modules: KernelModules = field(default_factory=KernelModules)
    gpus: list[Gpu] = field(default_factory=list)
    toolkits: list[Toolkit] = field(default_factory=list)
    compat: list[CompatLibrary] = field(default_factory=list)
    containers: Containers = field(default_factory=Containers)
    python: list[PythonPackage] = field(default_factory=list)
    llamacpp: list[LlamaCppBuild] = field(default_factory=list)
    vllm_services: list[VllmService] = field(default_factory=list)
    llama_servers: list[LlamaServer] = field(default_factory=list)
    probes: list[ProbeResult] = field(default_factory=list)


_PROBED_ON = re.compile(r"\bprobes on (\S+)")


def probed_on(probes: str, host: str, how: str = "") -> str:
    """A source naming the host that `probes` ran on: "local probes on gpu1"."""
    return f"{probes} probes on {host}" + (f" {how}" if how else "")


def probed_hosts(sources: Iterable[str]) -> set[str]:
    """The hosts that sources worded by `probed_on` name."""
    return {m.group(1) for source in sources for m in _PROBED_ON.finditer(source)}


def normalise_bus_id(bus_id: str) -> str:
    """PCI bus ids appear as 00000000:2D:00.0, 0000:2d:00.0 or 2D:00.0; compare on bus:dev.fn."""
    value = bus_id.strip().lower()
    parts = value.split(":")
    return ":".join(parts[-2:]) if len(parts) >= 2 else value


D = TypeVar("D")
MIN_CUT_NAME = 10  # the shortest start of a GPU's name taken for the whole name cut short


def merge(base: D, extra: D) -> D:
    """Fill what `base` does not know from `extra`; lists of keyed items merge item by item.

    `base` wins where both know a value: the first source that knew a fact keeps it.
    """
    if not dataclasses.is_dataclass(base) or isinstance(base, type):
        return base if base is not None else extra
    for f in dataclasses.fields(base):
        mine = getattr(base, f.name)
        theirs = getattr(extra, f.name)
        if theirs is None or theirs == []:
            continue
        if mine is None or mine == []:
            setattr(base, f.name, _once_each(theirs) if isinstance(theirs, list) else theirs)
        elif dataclasses.is_dataclass(mine):
            merge(mine, theirs)
        elif isinstance(mine, list):
            setattr(base, f.name, _merge_lists(mine, theirs))
    return base


def _merge_lists(mine: list[Any], theirs: list[Any]) -> list[Any]:
    if not mine or not hasattr(mine[0], "key"):
        return mine + [item for item in theirs if item not in mine]
    by_key = {item.key(): item for item in mine if item.key() is not None}
    out = list(mine)
    taken: list[Gpu] = []  # GPUs of `mine` a GPU of `theirs` known by its name alone folded into
    kept: dict[str, str] = {}  # a model's words -> the name its fold kept
    for item in theirs:
        match = by_key.get(item.key()) if item.key() is not None else None
        if match is None and isinstance(item, Gpu) and item.key() is None:
            match = _fold(mine, out, item, taken)
        elif match is None and isinstance(item, Gpu):
            match = _same_gpu(out, item)
        if match is None:
            out.append(item)
            if item.key() is not None:
                by_key[item.key()] = item
        else:
            merge(match, item)
            if isinstance(item, Gpu) and _cut_from(match.name, item.name):
                match.name = item.name  # the whole name, where the first output cut it short
            if isinstance(item, Gpu) and match.key() is None and match.name and item.name:
                kept[_words(item.name)] = match.name
    for item in out[len(mine) :]:
        if isinstance(item, Gpu) and item.key() is None and item.name:
            item.name = kept.get(_words(item.name), item.name)  # one spelling for the model
    return out


def _once_each(items: list[Any]) -> list[Any]:
    """GPUs of one output, each once: one output may name a GPU twice (an error report and the
    start-up log under it, a log pasted twice). A repeat shares the bus id or uuid, or, where
    neither is known, the index under the same name."""
    out: list[Any] = []
    seen: dict[tuple[Any, ...], Gpu] = {}
    for item in items:
        identity = _identity(item) if isinstance(item, Gpu) else None
        first = seen.get(identity) if identity is not None else None
        if first is not None:
            merge(first, item)
            continue
        out.append(item)
        if identity is not None:
            seen[identity] = item
    return out


def _identity(gpu: Gpu) -> tuple[Any, ...] | None:
    if gpu.pci_bus_id:
        return ("bus", normalise_bus_id(gpu.pci_bus_id))
    if gpu.uuid:
        return ("uuid", gpu.uuid)
    if gpu.index is not None:
        return ("index", gpu.index, gpu.name)
    return None


def _same_gpu(gpus: list[Any], gpu: Gpu) -> Gpu | None:
    """GPUs from different outputs share no key when one lacks a bus id: match index, then name."""
    for other in gpus:
        same_name = gpu.name is None or other.name is None or gpu.name == other.name
        same_name = same_name or _cut_from(gpu.name, other.name) or _cut_from(other.name, gpu.name)
        if gpu.index is not None and other.index == gpu.index and same_name:
            return typing.cast(Gpu, other)
    if gpu.index is None and gpu.name is not None:
        same = [g for g in gpus if _bare(g.name) == _bare(gpu.name)]
        if len(same) == 1 and len(gpus) == 1:
            return typing.cast(Gpu, same[0])
    # The other way round: GPUs known by their name alone (a hand-written "GPU: 2x NAME") and a
    # tool's list under that name: each is the next one the tool lists.
    if gpu.name is not None and gpu.key() is not None:
        alone = (g for g in gpus if g.key() is None and g.name == gpu.name)
        found = next(alone, None)
        if found is not None:
            return typing.cast(Gpu, found)
    # A GPU known only by its index (a topology matrix) and one other outputs list without an index
    # are the same when they stand in the same place: both count in nvidia-smi's (PCI bus) order.
    place = gpu.index
    unindexed = all(g.index is None for g in gpus)
    if place is not None and place < len(gpus) and _only_index(gpu) and unindexed:
        return typing.cast(Gpu, gpus[place])
    if gpu.index is None:
        return next((g for g in gpus if _only_index(g)), None)
    return None


def _fold(mine: list[Any], out: list[Any], gpu: Gpu, taken: list[Gpu]) -> Gpu | None:
    """The GPU of `mine` that `gpu`, known by its name alone, is: one known by its name alone under
    the same model's words ("NVIDIA GeForce RTX 5090" in a warning, "2x RTX 5090" in a list),
    else one `_same_gpu` finds; each GPU of `mine` takes at most one of another output's, so a
    count ("2x") is never folded into fewer GPUs."""
    free = [g for g in mine if isinstance(g, Gpu) and not any(g is t for t in taken)]
    words = _words(gpu.name) if gpu.name else None
    match = next((g for g in free if g.key() is None and g.name and _words(g.name) == words), None)
    match = match or _same_gpu(out, gpu)
    if match is None or not any(match is g for g in free):
        return None
    taken.append(match)
    return match


_VENDOR_WORDS = re.compile(r"^(?:(?:NVIDIA|GeForce)\s+)+", re.IGNORECASE)


def _words(name: str) -> str:
    """A GPU name's model words, lower-cased, without NVIDIA's words before them and marks:
    "NVIDIA GeForce RTX\u2122 5090" and "rtx 5090" are both "rtx 5090"."""
    plain = " ".join(name.replace("\u2122", " ").replace("\u00ae", " ").split())
    return _VENDOR_WORDS.sub("", plain).lower()


def fill_in(found: list[Gpu], stated: list[Gpu]) -> bool:
    """Fill what each GPU of `found` leaves unknown from the stated GPU of the same model's words
    ("GT 740M" for "GeForce GT 740M"), where every statement of that model agrees; whether any
    was filled. No GPU is added."""
    filled = False
    for gpu in stated:
        words = _words(gpu.name) if gpu.name else None
        same = [g for g in stated if g.name and _words(g.name) == words]
        if words is None or any(dataclasses.replace(g, name=gpu.name) != gpu for g in same):
            continue
        for target in (g for g in found if g.name and _words(g.name) == words):
            before = dataclasses.replace(target)
            merge(target, dataclasses.replace(gpu, name=None))
            filled = filled or target != before
    return filled


def _bare(name: str | None) -> str | None:
    """A GPU name without the vendor word some outputs put first ("NVIDIA Quadro P2000")."""
    return name.removeprefix("NVIDIA ") if name else name


def _cut_from(short: str | None, whole: str | None) -> bool:
    """Whether `short` is `whole` cut short, as nvidia-smi's table cuts a long name ("Tesla
    P100-PCIE..." for "Tesla P100-PCIE-16GB"): a start of ten characters or more."""
    if short is None or whole is None:
        return False
    return MIN_CUT_NAME <= len(short) < len(whole) and whole.startswith(short)


def _only_index(gpu: Gpu) -> bool:
    return gpu.index is not None and dataclasses.replace(gpu, index=None) == Gpu()


def to_dict(facts: Any) -> Any:
    """Facts as plain JSON-ready data."""
    return dataclasses.asdict(facts)


T = TypeVar("T")


def from_dict(cls: type[T], data: Any, where: str = "") -> T:
    """Build `cls` from plain data, ignoring unknown keys; a missing field takes its default.

    Raises ValueError naming the first value that does not fit, by its path in the data:
    "gpus[0].memory_total_mib: expected an integer, got a string". Null is only taken where the
    field may be unknown; a list item or a field without a default is never null or missing.
    """
    if not isinstance(data, dict):
        raise ValueError(f"{where or cls.__name__}: expected an object, got {_kind(data)}")
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        path = f"{where}.{f.name}" if where else f.name
        if f.name in data:
            kwargs[f.name] = _convert(hints[f.name], data[f.name], path)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ValueError(f"{path}: missing")
    return cls(**kwargs)


_KINDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def _kind(value: Any) -> str:
    """What a JSON value is, for messages: null, a string, an object..."""
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return next((name for t, name in _KINDS.items() if isinstance(value, t)), "a value")


def _convert(hint: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return _convert(inner[0], value, where)
    if origin is list:
        if not isinstance(value, list):
            raise ValueError(f"{where}: expected a list, got {_kind(value)}")
        (item,) = typing.get_args(hint)
        return [_convert(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if dataclasses.is_dataclass(hint):
        return from_dict(typing.cast(type, hint), value, where)
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint in _KINDS and (type(value) is not hint):
        raise ValueError(f"{where}: expected {_KINDS[hint]}, got {_kind(value)}")
    return value
