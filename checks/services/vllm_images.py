"""vLLM's published images: which tag a driver runs, and what a pulled image will do on this host.

The tags and the CUDA behind them live in checks/matrix/tables/vllm_images.toml. The preflight
reads a `docker image inspect` and predicts two failures before the container starts: the toolkit's
"unsatisfied condition: cuda>=X" (CTR-001) and Error 804 (CTR-002).
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any

from packaging.version import Version

from checks import versions
from checks.facts.model import ContainerImage, HostFacts
from checks.facts.parsers.containers import parse_image_inspect
from checks.matrix import engine, registry
from checks.matrix.engine import Finding

REPOSITORY = "vllm/vllm-openai"

_VERSION = r"\d+\.\d+\.\d+(?:\.\d+|\.post\d+)?"
_RELEASE = re.compile(rf"v?({_VERSION})")
_TAG = re.compile(rf"v(?P<version>{_VERSION})(?:-cu(?P<cu>\d{{3}}))?(?:-[\w.]+)?")
_TRUE = ("1", "t", "true")  # Go's strconv.ParseBool, as the toolkit reads NVIDIA_DISABLE_REQUIRE


class ImageError(ValueError):
    """No published tag of the requested release runs on this driver, or the request is bad."""


@dataclass(frozen=True)
class Choice:
    """The image reference to pull, the CUDA it is built on, and why it was chosen."""

    ref: str
    cuda: str | None
    reason: str


@dataclass(frozen=True)
class _Tag:
    suffix: str
    cuda: Version


@dataclass(frozen=True)
class _Era:
    first: Version
    before: Version | None
    last: str
    tags: tuple[_Tag, ...]

    def holds(self, release: Version) -> bool:
        return self.first <= release and (self.before is None or release < self.before)


def _eras() -> list[_Era]:
    """The release eras, newest first."""
    out = []
    for raw in registry.table("vllm_images")["era"]:
        tags = tuple(_Tag(t["suffix"], Version(t["cuda"])) for t in raw["tags"])
        before = Version(raw["before"]) if raw["before"] else None
        out.append(_Era(Version(raw["first"]), before, raw["last"], tags))
    return sorted(out, key=lambda e: e.first, reverse=True)


def _era(release: Version) -> _Era | None:
    return next((e for e in _eras() if e.holds(release)), None)


def parse_release(version: str) -> Version:
    """A vLLM release ("v0.21.0", "0.10.1.1", "v0.8.5.post1") as a Version; else ImageError."""
    match = _RELEASE.fullmatch(version.strip())
    if match is None:
        raise ImageError(f"{version!r} is not a vLLM release (expected vX.Y.Z, e.g. v0.21.0)")
    return Version(match.group(1))


def _split(ref: str) -> tuple[str, str] | None:
    """(repository, tag) of an image reference; None for digests and untagged references."""
    name = ref.strip()
    if "@" in name:
        return None
    repo, sep, tag = name.rpartition(":")
    if not sep or "/" in tag:
        return None
    return repo, tag


def _published(repo: str) -> bool:
    """Whether a repository is vLLM's published one, with or without a registry host in front."""
    return repo == REPOSITORY or repo.endswith("/" + REPOSITORY)


def _release_tag(ref: str) -> re.Match[str] | None:
    parts = _split(ref)
    if parts is None or not _published(parts[0]):
        return None
    return _TAG.fullmatch(parts[1])


def version_of_ref(ref: str) -> str | None:
    """The release a published vLLM image ref names: "0.21.0" for vllm/vllm-openai:v0.21.0-cu129."""
    match = _release_tag(ref)
    return match.group("version") if match else None


def version_of_image(ref: str, inspect: str | None) -> str | None:
    """The release an image runs: its ref's tag, else (an image pinned by digest or a local tag)
    a release tag the pulled image carries in `docker image inspect`'s RepoTags."""
    found = version_of_ref(ref)
    if found is None and inspect:
        tags, _ = _inspected(inspect)
        found = next((v for v in map(version_of_ref, tags) if v is not None), None)
    return found


def cuda_of_ref(ref: str) -> str | None:
    """The CUDA X.Y a published vLLM image ref is built on; None for latest, nightlies, unknowns.

    A -cuXYZ suffix names it; a plain tag takes its release's default from the era table.
    """
    match = _release_tag(ref)
    if match is None:
        return None
    if match.group("cu"):
        digits = match.group("cu")
        return f"{digits[:-1]}.{digits[-1]}"
    era = _era(Version(match.group("version")))
    plain = next((t for t in era.tags if not t.suffix), None) if era else None
    return str(plain.cuda) if plain else None


def select(
    version: str,
    driver_cuda: Version | None,
    repository: str = REPOSITORY,
    pinned: str = "",
) -> Choice:
    """The tag of release `version` that a driver supporting CUDA `driver_cuda` runs.

    The tag with the newest CUDA the driver reaches wins. `pinned` is returned as it is. Forward
    compatibility is not counted on: it needs a data-center GPU, and the caller's preflight
    judges the pulled image against the GPUs themselves.
    """
    if pinned.strip():
        return Choice(pinned, cuda_of_ref(pinned), "pinned in the inventory")
    wanted = parse_release(version)
    era = _era(wanted)
    if era is None:
        raise ImageError(
            f"the CUDA that vLLM v{wanted}'s images are built on is not known "
            "(checks/matrix/tables/vllm_images.toml); pin vllm_image to a reference you have "
            "checked"
        )
    tags = sorted(era.tags, key=lambda t: t.cuda, reverse=True)
    ref = f"{repository}:v{wanted}"
    if driver_cuda is None:
        plain = next((t for t in tags if not t.suffix), tags[0])
        return Choice(ref + plain.suffix, str(plain.cuda), "driver CUDA unknown: the plain tag")
    runnable = [t for t in tags if t.cuda <= driver_cuda]
    if runnable:
        tag = runnable[0]
        chosen = ref + tag.suffix
        reason = f"{chosen} is built on CUDA {tag.cuda}; the driver supports CUDA {driver_cuda}"
        if tag is not tags[0]:
            reason += f" (v{wanted}{tags[0].suffix} needs CUDA {tags[0].cuda})"
        return Choice(chosen, str(tag.cuda), reason)
    raise ImageError(_no_tag(wanted, tags, driver_cuda, repository))


def _no_tag(wanted: Version, tags: list[_Tag], driver_cuda: Version, repository: str) -> str:
    """Why no tag runs: the driver the lowest tag needs, and the newest older release that runs."""
    lowest = tags[-1]
    built = " and ".join(f"v{wanted}{t.suffix} on CUDA {t.cuda}" for t in tags)
    text = (
        f"no {repository} image of v{wanted} runs on this driver (CUDA {driver_cuda}): {built}. "
        f"Upgrade the driver to {_driver_for(lowest.cuda)} or newer (for v{wanted}{lowest.suffix})"
    )
    older = _older(driver_cuda)
    if older is None:
        return text + "; no published vLLM image runs on this driver"
    version, tag = older
    return text + (
        f", or use v{version} ({repository}:v{version}{tag.suffix}, CUDA {tag.cuda}), the newest "
        "release known to run on it"
    )


def _driver_for(cuda: Version) -> str:
    minimum = registry.cuda_minimum_driver(cuda)
    return str(minimum) if minimum is not None else f"a driver for CUDA {cuda}"


def _older(driver_cuda: Version) -> tuple[str, _Tag] | None:
    """The newest release a source confirms whose tags include one the driver runs."""
    for era in _eras():
        runnable = [t for t in era.tags if t.cuda <= driver_cuda]
        if runnable and era.last:
            return era.last, max(runnable, key=lambda t: t.cuda)
    return None


# --- the pulled image ------------------------------------------------------------------------


def _inspected(text: str) -> tuple[list[str], dict[str, str]]:
    """RepoTags and Config.Env of the first image in `docker image inspect` output."""
    start = text.find("[")
    try:
        value: Any = json.JSONDecoder().raw_decode(text, start)[0] if start != -1 else None
    except (ValueError, RecursionError):
        value = None
    item = value[0] if isinstance(value, list) and value else None
    if not isinstance(item, dict):
        return [], {}
    tags = [t for t in item.get("RepoTags") or [] if isinstance(t, str)]
    config = item.get("Config")
    env: dict[str, str] = {}
    for entry in (config.get("Env") if isinstance(config, dict) else None) or []:
        if isinstance(entry, str):
            key, _, val = entry.partition("=")
            env[key] = val
    return tags, env


def _compat_mode(release_version: Version) -> str | None:
    for raw in registry.table("vllm_images")["compat"]:
        first, before = Version(raw["first"]), raw["before"]
        if first <= release_version and (not before or release_version < Version(before)):
            return str(raw["mode"])
    return None


def compat_driver(cuda_version: str | None) -> versions.DriverVersion | None:
    """The libcuda of the cuda-compat package of CUDA `cuda_version`: the driver it ships with.

    12.8.1 gives 570.124.06; an update the table lacks falls back to its X.Y release.
    """
    wanted = versions.cuda(cuda_version)
    if wanted is None:
        return None
    for release_version, driver in registry.cuda_releases():
        if release_version == wanted:
            return driver
    return registry.release_minimum(wanted)


def _loads_compat(tags: list[str], env: dict[str, str]) -> bool:
    """Whether the image puts its compat libcuda on the library path when it starts."""
    flag = env.get("VLLM_ENABLE_CUDA_COMPATIBILITY")
    if flag is not None:
        return flag.strip().lower() in ("1", "true")
    for tag in tags:
        found = version_of_ref(tag)
        if found is not None:
            return _compat_mode(Version(found)) is not None
    return False


def image_from_inspect(text: str) -> ContainerImage | None:
    """The image `docker image inspect` describes, as the NVIDIA Container Toolkit will see it.

    NVIDIA_DISABLE_REQUIRE=true drops the requirement (the toolkit skips the check); an image with
    CUDA_VERSION and no NVIDIA_REQUIRE_CUDA requires cuda>=X.Y of it. compat_driver_version is
    set when the image is a published vLLM release that loads its compat libraries (or sets
    VLLM_ENABLE_CUDA_COMPATIBILITY=1): the driver of its CUDA_VERSION.
    """
    images = parse_image_inspect(text).containers.images
    if not images:
        return None
    image = images[0]
    tags, env = _inspected(text)
    if env.get("NVIDIA_DISABLE_REQUIRE", "").strip().lower() in _TRUE:
        image.require_cuda = None
    elif image.require_cuda is None and versions.release(image.cuda_version) is not None:
        image.require_cuda = f"cuda>={versions.release(image.cuda_version)}"
    if _loads_compat(tags, env):
        driver = compat_driver(image.cuda_version)
        image.compat_driver_version = str(driver) if driver is not None else None
    return image


def preflight(facts: HostFacts, image: ContainerImage) -> list[Finding]:
    """CTR-001 and CTR-002 for `image` on this host, before any container starts.

    CTR-001's evaluator leaves out an image the toolkit accepts through a brand/driver
    alternative of NVIDIA_REQUIRE_CUDA (a data-center GPU on an older branch, or a GeForce on 535
    with a CUDA 12.4 image); CTR-002 counts the image's compat libcuda when it loads it. Error 803
    (CTR-003) is not predicted: compat libraries older than the host driver load or not depending
    on the NVIDIA Container Toolkit's version and mode, which the image does not tell.
    """
    planned = copy.deepcopy(facts)
    planned.containers.images = [image]
    return engine.evaluate(planned, route="image")
