"""vLLM's published images: which tag a driver runs, and what a pulled image will do on this host.

The tags and the CUDA behind them live in checks/matrix/tables/vllm_images.toml. The preflight
reads a `docker image inspect` and predicts two failures before the container starts: the toolkit's
"unsatisfied condition: cuda>=X" (CTR-001) and Error 804 (CTR-002).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass

from packaging.version import Version

from checks.facts.model import ContainerImage, HostFacts
from checks.facts.parsers.containers import parse_image_inspect
from checks.matrix import engine, images, registry
from checks.matrix.engine import Finding

REPOSITORY = images.VLLM_REPOSITORY

_RELEASE = re.compile(r"v?(\d+\.\d+\.\d+(?:\.\d+|\.post\d+)?)")


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


def version_of_ref(ref: str) -> str | None:
    """The release a published vLLM image ref names: "0.21.0" for vllm/vllm-openai:v0.21.0-cu129."""
    return images.vllm_version_of_ref(ref)


def version_of_image(ref: str, inspect: str | None) -> str | None:
    """The release an image runs: its ref's tag, else (an image pinned by digest or a local tag)
    a release tag the pulled image carries in `docker image inspect`'s RepoTags."""
    found = version_of_ref(ref)
    if found is None and inspect:
        image = image_from_inspect(inspect)
        tags = (image.tags or []) if image is not None else []
        found = next((v for v in map(version_of_ref, tags) if v is not None), None)
    return found


def cuda_of_ref(ref: str) -> str | None:
    """The CUDA X.Y a published vLLM image ref is built on; None for latest, nightlies, unknowns.

    A -cuXYZ suffix names it; a plain tag takes its release's default from the era table.
    """
    match = images.vllm_release_tag(ref)
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


def image_from_inspect(text: str) -> ContainerImage | None:
    """The first image `docker image inspect` describes, with the values the matrix judges
    (checks/matrix/images.py says what the toolkit and the entrypoint do with them)."""
    found = parse_image_inspect(text).containers.images
    return found[0] if found else None


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
