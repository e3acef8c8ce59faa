"""What an image does on a host, judged from its environment: one judgement for every source.

`check --from` on `docker image inspect`, `check --image` (local engine or registry) and the
gate's preflight of a pulled vLLM image all hand the matrix a ContainerImage with the image's own
values; this module says how the NVIDIA Container Toolkit and the image's entrypoint act on them:
the CUDA requirement the toolkit enforces, and the compat libcuda the image loads.
"""

from __future__ import annotations

import re

from packaging.version import Version

from checks import versions
from checks.facts.model import ContainerImage
from checks.matrix import registry

VLLM_REPOSITORY = "vllm/vllm-openai"

_VERSION = r"\d+\.\d+\.\d+(?:\.\d+|\.post\d+)?"
_TAG = re.compile(rf"v(?P<version>{_VERSION})(?:-cu(?P<cu>\d{{3}}))?(?:-[\w.]+)?")


def split_ref(ref: str) -> tuple[str, str] | None:
    """(repository, tag) of an image reference; None for digests and untagged references."""
    name = ref.strip()
    if "@" in name:
        return None
    repo, sep, tag = name.rpartition(":")
    if not sep or "/" in tag:
        return None
    return repo, tag


def vllm_release_tag(ref: str) -> re.Match[str] | None:
    """The release tag of a published vLLM image ref (with or without a registry host)."""
    parts = split_ref(ref)
    if parts is None:
        return None
    repo = parts[0]
    if repo != VLLM_REPOSITORY and not repo.endswith("/" + VLLM_REPOSITORY):
        return None
    return _TAG.fullmatch(parts[1])


def vllm_version_of_ref(ref: str) -> str | None:
    """The release a published vLLM image ref names: "0.21.0" for vllm/vllm-openai:v0.21.0-cu129."""
    match = vllm_release_tag(ref)
    return match.group("version") if match else None


def label(image: ContainerImage) -> str:
    """How findings name the image (their subject)."""
    return f"image {image.ref}" if image.ref else "an image"


def requirement(image: ContainerImage) -> str | None:
    """The requirement the toolkit enforces: none when NVIDIA_DISABLE_REQUIRE is true, else
    NVIDIA_REQUIRE_CUDA, else (an image that sets only CUDA_VERSION) cuda>=X.Y of it."""
    if image.disable_require is True:
        return None
    if image.require_cuda:
        return image.require_cuda
    release = versions.release(image.cuda_version)
    return f"cuda>={release}" if release is not None else None


def loads_compat(image: ContainerImage) -> bool:
    """Whether the image puts its compat libcuda on the library path when it starts: its
    VLLM_ENABLE_CUDA_COMPATIBILITY, else what its vLLM release does by default."""
    if image.compat_setting is not None:
        return image.compat_setting.strip().lower() in ("1", "true")
    return vllm_compat_mode(image)[1] is not None


def vllm_compat_mode(image: ContainerImage) -> tuple[str | None, str | None]:
    """(vLLM release, how it loads its compat libcuda by default: tables/vllm_images.toml's
    `mode`) of the first tag or reference naming a published release; None for what is not known."""
    for ref in [*(image.tags or []), *([image.ref] if image.ref else [])]:
        found = vllm_version_of_ref(ref)
        if found is None:
            continue
        release = Version(found)
        for raw in registry.table("vllm_images")["compat"]:
            first, before = Version(raw["first"]), raw["before"]
            if first <= release and (not before or release < Version(before)):
                return found, str(raw["mode"])
        return found, None
    return None, None


def compat_driver_of_cuda(cuda_version: str | None) -> versions.DriverVersion | None:
    """The libcuda of the cuda-compat package of CUDA `cuda_version`: the driver it ships with.

    12.8.1 gives 570.124.06; an update the table lacks falls back to its X.Y release.
    """
    wanted = versions.cuda(cuda_version)
    if wanted is None:
        return None
    for release, driver in registry.cuda_releases():
        if release == wanted:
            return driver
    return registry.release_minimum(wanted)


def compat_driver(image: ContainerImage) -> versions.DriverVersion | None:
    """The driver version of the compat libcuda the image loads; None when it loads none."""
    stated = versions.driver(image.compat_driver_version)
    if stated is not None:
        return stated
    return compat_driver_of_cuda(image.cuda_version) if loads_compat(image) else None
