"""vLLM image tags by driver CUDA, and the preflight of a pulled image against the host.

tests/fixtures/images/ holds `docker image inspect` output of published vLLM images and the host
facts they are judged on; SOURCES.tsv there says where each came from.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
from pathlib import Path

import pytest
from packaging.version import Version

from checks import versions
from checks.facts import capture
from checks.facts.model import FACTS_SCHEMA_VERSION, HostFacts, from_dict, to_dict
from checks.logs import explain, logscan
from checks.matrix import images, registry
from checks.matrix.host import requirement_met
from checks.reporting import report
from checks.services import vllm_images
from checks.services.vllm_images import Choice, ImageError

IMAGES = Path(__file__).parent / "fixtures" / "images"


def _inspect(name: str, *extra_env: str) -> str:
    """The fixture's inspect output; extra_env appends variables as a derived image would."""
    data = json.loads((IMAGES / f"vllm-openai_{name}.json").read_text())
    data[0]["Config"]["Env"] += list(extra_env)
    return json.dumps(data)


def _host(name: str) -> HostFacts:
    case = json.loads((IMAGES / f"host_{name}.json").read_text())
    assert case["description"]
    return from_dict(HostFacts, case["facts"])


def _rules(host: str, image: str, *extra_env: str) -> list[str]:
    found = vllm_images.image_from_inspect(_inspect(image, *extra_env))
    assert found is not None
    return [f.rule for f in vllm_images.preflight(_host(host), found)]


def _driver_cuda(driver: str) -> Version:
    version = versions.driver(driver)
    assert version is not None
    found = registry.driver_cuda(version)
    assert found is not None
    return found


# ---------------------------------------------------------------------------------------------
# Fixtures and data


def test_sources_list_every_fixture() -> None:
    with (IMAGES / "SOURCES.tsv").open(newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    assert {row["file"] for row in rows} == {p.name for p in IMAGES.glob("*.json")}
    for row in rows:
        assert row["sources"].startswith(("constructed", "https://")), row
        assert row["taken"], row


INSPECTED = [
    ("v0.23.0", "vllm/vllm-openai:v0.23.0", "13.0.2", None),
    ("v0.23.0-cu129", "vllm/vllm-openai:v0.23.0-cu129", "12.9.1", None),
    ("v0.16.0", "vllm/vllm-openai:v0.16.0", "12.9.1", "575.57.08"),
    ("v0.9.0", "vllm/vllm-openai:v0.9.0", "12.8.1", "570.124.06"),
    ("v0.8.5", "vllm/vllm-openai:v0.8.5", "12.4.0", "550.54.14"),
    ("v0.5.0", "vllm/vllm-openai:v0.5.0", "12.4.1", "550.54.15"),
]


@pytest.mark.parametrize(("name", "ref", "cuda_version", "compat"), INSPECTED)
def test_image_from_inspect_reads_each_published_image(
    name: str, ref: str, cuda_version: str, compat: str | None
) -> None:
    image = vllm_images.image_from_inspect(_inspect(name))
    assert image is not None
    loaded = images.compat_driver(image)
    assert (image.ref, image.cuda_version, str(loaded) if loaded else None) == (
        ref,
        cuda_version,
        compat,
    )
    enforced = images.requirement(image)
    assert enforced is not None
    # The tag table and the image agree on the CUDA the tag is built on.
    assert enforced.startswith(f"cuda>={vllm_images.cuda_of_ref(ref)} ")
    assert vllm_images.cuda_of_ref(ref) == str(versions.release(cuda_version))


def test_environment_table_spells_the_fixtures_requirements() -> None:
    """Each [[environment]] row rebuilds its image's NVIDIA_REQUIRE_CUDA, one alternative a time."""
    seen = {}
    for name, *_ in INSPECTED:
        env = json.loads(_inspect(name))[0]["Config"]["Env"]
        values = dict(e.split("=", 1) for e in env)
        seen[values["CUDA_VERSION"]] = values["NVIDIA_REQUIRE_CUDA"]
    for row in registry.table("vllm_images")["environment"]:
        alternatives = [
            f"brand={b},driver>={n},driver<{n + 1}" for n in row["branches"] for b in row["brands"]
        ]
        assert seen[row["cuda_version"]] == " ".join([row["require_cuda"], *alternatives])


def test_eras_do_not_overlap_and_name_their_cuda() -> None:
    eras = sorted(registry.table("vllm_images")["era"], key=lambda e: Version(e["first"]))
    for older, newer in itertools.pairwise(eras):
        assert older["before"] and Version(older["before"]) <= Version(newer["first"])
    for era in eras:
        assert [t["suffix"] for t in era["tags"]].count("") == 1, era
        assert era["sources"] and era["verified"], era
        for tag in era["tags"]:
            assert all(str(versions.release(v)) == tag["cuda"] for v in tag["cuda_versions"])


# ---------------------------------------------------------------------------------------------
# Tag selection


@pytest.mark.parametrize(
    ("driver", "ref", "cuda"),
    [
        ("580.159.03", "vllm/vllm-openai:v0.21.0", "13.0"),
        ("580.65.06", "vllm/vllm-openai:v0.21.0", "13.0"),
        ("575.57.08", "vllm/vllm-openai:v0.21.0-cu129", "12.9"),
        ("575.51.03", "vllm/vllm-openai:v0.21.0-cu129", "12.9"),
    ],
)
def test_select_takes_the_newest_cuda_the_driver_runs(driver: str, ref: str, cuda: str) -> None:
    choice = vllm_images.select("v0.21.0", _driver_cuda(driver))
    assert (choice.ref, choice.cuda) == (ref, cuda)
    assert f"CUDA {cuda}" in choice.reason


def test_select_says_why_a_variant_was_taken() -> None:
    choice = vllm_images.select("v0.21.0", Version("12.9"))
    assert choice.reason.endswith("(v0.21.0 needs CUDA 13.0)")


@pytest.mark.parametrize(
    ("driver", "older"),
    [
        ("570.172.08", "v0.10.1.1 (vllm/vllm-openai:v0.10.1.1, CUDA 12.8)"),
        ("550.144.03", "v0.8.5 (vllm/vllm-openai:v0.8.5, CUDA 12.4)"),
        ("535.183.01", "v0.4.2 (vllm/vllm-openai:v0.4.2, CUDA 12.1)"),
    ],
)
def test_no_tag_of_the_release_runs_on_an_older_driver(driver: str, older: str) -> None:
    with pytest.raises(ImageError) as error:
        vllm_images.select("v0.21.0", _driver_cuda(driver))
    message = str(error.value)
    assert "upgrade the driver to 575.51.03 or newer (for v0.21.0-cu129)" in message.lower()
    assert f"use {older}" in message


def test_a_driver_below_every_image_gets_no_older_release() -> None:
    with pytest.raises(ImageError, match="no published vLLM image runs on this driver"):
        vllm_images.select("v0.21.0", Version("11.8"))


@pytest.mark.parametrize(
    ("version", "cuda", "ref"),
    [
        ("v0.9.0", "12.8", "vllm/vllm-openai:v0.9.0"),
        ("0.10.1.1", "12.8", "vllm/vllm-openai:v0.10.1.1"),
        ("v0.8.5.post1", "12.4", "vllm/vllm-openai:v0.8.5.post1"),
        ("v0.16.0", "12.9", "vllm/vllm-openai:v0.16.0"),
        ("v0.23.0", "13.0", "vllm/vllm-openai:v0.23.0"),
    ],
)
def test_select_older_releases_on_their_own_cuda(version: str, cuda: str, ref: str) -> None:
    assert vllm_images.select(version, Version(cuda)).ref == ref
    with pytest.raises(ImageError):
        vllm_images.select(version, Version("12.1"))


def test_select_with_an_unknown_driver_takes_the_plain_tag() -> None:
    choice = vllm_images.select("v0.21.0", None)
    assert (choice.ref, choice.cuda) == ("vllm/vllm-openai:v0.21.0", "13.0")


def test_select_uses_the_repository_given() -> None:
    choice = vllm_images.select(
        "v0.21.0", Version("12.9"), repository="mirror.lan/vllm/vllm-openai"
    )
    assert choice.ref == "mirror.lan/vllm/vllm-openai:v0.21.0-cu129"


@pytest.mark.parametrize(
    ("pinned", "cuda"),
    [
        ("vllm/vllm-openai:v0.10.1.1", "12.8"),
        ("vllm/vllm-openai:v0.21.0", "13.0"),
        ("registry.lan/team/vllm:2026-05", None),
        ("vllm/vllm-openai@sha256:" + "a" * 64, None),
    ],
)
def test_a_pinned_ref_is_returned_as_it_is(pinned: str, cuda: str | None) -> None:
    # Pinned refs skip selection even where the driver could not run them.
    assert vllm_images.select("v0.21.0", Version("12.2"), pinned=pinned) == Choice(
        pinned, cuda, "pinned in the inventory"
    )


@pytest.mark.parametrize(
    "version", ["latest", "", "0.21", "v0.21", "v0.21.0-cu129", "v0.21.0; rm -rf /", "nightly"]
)
def test_select_refuses_what_is_not_a_release(version: str) -> None:
    with pytest.raises(ValueError, match="is not a vLLM release"):
        vllm_images.select(version, Version("13.0"))


@pytest.mark.parametrize("version", ["v0.10.2", "v0.6.6.post1", "v0.2.0"])
def test_select_refuses_releases_whose_cuda_is_unverified(version: str) -> None:
    with pytest.raises(ImageError, match="is not known"):
        vllm_images.select(version, Version("13.0"))


# ---------------------------------------------------------------------------------------------
# Refs


@pytest.mark.parametrize(
    ("ref", "cuda", "version"),
    [
        ("vllm/vllm-openai:v0.21.0", "13.0", "0.21.0"),
        ("vllm/vllm-openai:v0.21.0-cu129", "12.9", "0.21.0"),
        ("docker.io/vllm/vllm-openai:v0.21.0-cu129-ubuntu2404", "12.9", "0.21.0"),
        ("vllm/vllm-openai:v0.19.1-cu130", "13.0", "0.19.1"),
        ("vllm/vllm-openai:v0.19.1", "12.9", "0.19.1"),
        ("vllm/vllm-openai:v0.10.1.1", "12.8", "0.10.1.1"),
        ("vllm/vllm-openai:v0.9.0", "12.8", "0.9.0"),
        ("vllm/vllm-openai:v0.8.5", "12.4", "0.8.5"),
        ("vllm/vllm-openai:v0.5.0", "12.4", "0.5.0"),
        ("vllm/vllm-openai:v0.4.2", "12.1", "0.4.2"),
        ("vllm/vllm-openai:v0.10.2", None, "0.10.2"),
        ("vllm/vllm-openai:latest", None, None),
        ("vllm/vllm-openai:latest-cu129", None, None),
        ("vllm/vllm-openai:nightly-0123456789abcdef", None, None),
        ("vllm/vllm-openai:cu130-nightly", None, None),
        ("vllm/vllm-openai@sha256:" + "b" * 64, None, None),
        ("someone/vllm-openai:v0.21.0", None, None),
        ("vllm/vllm-openai", None, None),
    ],
)
def test_refs_name_their_release_and_cuda(ref: str, cuda: str | None, version: str | None) -> None:
    assert vllm_images.cuda_of_ref(ref) == cuda
    assert vllm_images.version_of_ref(ref) == version


# ---------------------------------------------------------------------------------------------
# The pulled image


def test_inspect_of_something_else_is_no_image() -> None:
    assert vllm_images.image_from_inspect("Error: No such image: vllm/vllm-openai:v9") is None
    assert vllm_images.image_from_inspect("[]") is None


def test_disable_require_drops_the_requirement() -> None:
    image = vllm_images.image_from_inspect(_inspect("v0.23.0", "NVIDIA_DISABLE_REQUIRE=true"))
    assert image is not None and image.disable_require is True
    assert images.requirement(image) is None
    assert image.require_cuda is not None  # the image's own value stays as it was


@pytest.mark.parametrize(("value", "disabled"), [("1", True), ("True", True), ("false", False),
                                                 ("yes", False), ("true ", False)])  # fmt: skip
def test_disable_require_is_read_as_go_parses_it(value: str, disabled: bool) -> None:
    """The toolkit reads NVIDIA_DISABLE_REQUIRE with strconv.ParseBool; anything else keeps it."""
    image = vllm_images.image_from_inspect(_inspect("v0.23.0", f"NVIDIA_DISABLE_REQUIRE={value}"))
    assert image is not None
    assert (images.requirement(image) is None) is disabled


def test_a_legacy_image_requires_its_cuda_version() -> None:
    text = json.dumps([{"RepoTags": ["old/cuda:1"], "Config": {"Env": ["CUDA_VERSION=12.1.0"]}}])
    image = vllm_images.image_from_inspect(text)
    assert image is not None and images.requirement(image) == "cuda>=12.1"


def test_compat_follows_vllm_enable_cuda_compatibility() -> None:
    on = vllm_images.image_from_inspect(_inspect("v0.23.0", "VLLM_ENABLE_CUDA_COMPATIBILITY=1"))
    off = vllm_images.image_from_inspect(_inspect("v0.16.0", "VLLM_ENABLE_CUDA_COMPATIBILITY=0"))
    assert on is not None and str(images.compat_driver(on)) == "580.95.05"
    assert off is not None and images.compat_driver(off) is None


def test_an_image_retagged_locally_is_not_known_to_load_compat() -> None:
    data = json.loads(_inspect("v0.16.0"))
    data[0]["RepoTags"] = ["registry.lan/vllm:prod"]
    image = vllm_images.image_from_inspect(json.dumps(data))
    assert image is not None and images.compat_driver(image) is None


# ---------------------------------------------------------------------------------------------
# Preflight


@pytest.mark.parametrize(
    ("host", "image", "rules"),
    [
        # RTX 3090 on 570 (CUDA 12.8): no GeForce alternative in 12.9+ images.
        ("dual3090_570", "v0.23.0", ["CTR-001"]),
        ("dual3090_570", "v0.23.0-cu129", ["CTR-001"]),
        ("dual3090_570", "v0.16.0", ["CTR-001", "CTR-002"]),
        ("dual3090_570", "v0.9.0", []),
        # RTX 3090 on 535: 12.4 images list brand=geforce,driver>=535, start, then Error 804.
        ("dual3090_535", "v0.5.0", ["CTR-002"]),
        ("dual3090_535", "v0.8.5", ["CTR-002"]),
        ("dual3090_535", "v0.9.0", ["CTR-001", "CTR-002"]),
        # A data-center GPU starts through brand=nvidia,driver>=570 and may use forward compat.
        ("h100_570", "v0.23.0", []),
        ("h100_570", "v0.16.0", []),
        # Driver 580: everything runs; compat libraries older than it are CTR-003's business.
        ("dual3090_580", "v0.23.0", []),
        ("dual3090_580", "v0.23.0-cu129", []),
        ("dual3090_580", "v0.16.0", []),
    ],
)
def test_preflight_predicts_what_the_container_will_hit(
    host: str, image: str, rules: list[str]
) -> None:
    assert _rules(host, image) == rules


def test_preflight_findings_name_the_requirement_and_the_compat_driver() -> None:
    image = vllm_images.image_from_inspect(_inspect("v0.16.0"))
    assert image is not None
    ctr001, ctr002 = vllm_images.preflight(_host("dual3090_570"), image)
    assert "cuda>=12.9" in ctr001.message and "570.172.08" in ctr001.message
    assert "575.51.03" in ctr001.fix  # the CUDA 12.9 minimum, as tables/cuda.toml writes it
    assert ctr002.subject == "image vllm/vllm-openai:v0.16.0 compat libraries"
    assert "consumer" in ctr002.message and "GPU 0 (NVIDIA GeForce RTX 3090)" in ctr002.message


def test_disable_require_on_a_geforce_trades_ctr001_for_error_804() -> None:
    assert _rules("dual3090_570", "v0.23.0", "NVIDIA_DISABLE_REQUIRE=1") == []
    enabled = ("NVIDIA_DISABLE_REQUIRE=1", "VLLM_ENABLE_CUDA_COMPATIBILITY=1")
    assert _rules("dual3090_570", "v0.23.0", *enabled) == ["CTR-002"]
    assert _rules("h100_570", "v0.23.0", *enabled) == []


def test_preflight_does_not_change_the_host_facts() -> None:
    facts = _host("dual3090_570")
    image = vllm_images.image_from_inspect(_inspect("v0.16.0"))
    assert image is not None
    vllm_images.preflight(facts, image)
    assert facts.containers.images == []
    assert image.require_cuda is not None


def test_a_gpu_of_unknown_brand_keeps_ctr001() -> None:
    facts = _host("dual3090_535")
    for gpu in facts.gpus:
        gpu.brand = gpu.brand_class = None
    image = vllm_images.image_from_inspect(_inspect("v0.5.0"))
    assert image is not None and image.require_cuda is not None
    assert requirement_met(image.require_cuda, facts) is None
    assert [f.rule for f in vllm_images.preflight(facts, image)] == ["CTR-001"]


@pytest.mark.parametrize(
    ("require", "host", "met"),
    [
        ("cuda>=12.8", "dual3090_570", True),
        ("cuda>=12.9", "dual3090_570", False),
        ("cuda>=12.9 brand=geforce,driver>=570,driver<571", "dual3090_570", True),
        ("cuda>=12.9 brand=geforce,driver>=575,driver<576", "dual3090_570", False),
        ("cuda>=12.9 brand=tesla,driver>=570,driver<571", "h100_570", False),
        ("cuda>=12.9 brand=unknown,driver>=570,driver<571", "h100_570", True),
        ("cuda>=12.9 brand=nvidia,driver>=570,driver<571", "h100_570", True),
        ("cuda>=12.9 arch>=9.0", "h100_570", True),
        ("cuda>=12.9 arch>=9.0", "dual3090_570", False),
        ("cuda>=12.9 brand!=geforce", "dual3090_570", False),
    ],
)
def test_requirement_met_follows_the_toolkit(require: str, host: str, met: bool) -> None:
    assert requirement_met(require, _host(host)) is met


def test_requirement_met_needs_a_driver_and_gpus() -> None:
    assert requirement_met("cuda>=12.8", HostFacts()) is None


# ---------------------------------------------------------------------------------------------
# explain: a vLLM tag names its CUDA


@pytest.mark.parametrize(
    ("line", "cuda", "minimum"),
    [
        ("docker run --gpus all vllm/vllm-openai:v0.9.0 --model m", "12.8", "570.26"),
        ("docker run --gpus all vllm/vllm-openai:v0.21.0 --model m", "13.0", "580.65.06"),
        ("docker run --gpus all vllm/vllm-openai:v0.21.0-cu129 --model m", "12.9", "575.51.03"),
    ],
)
def test_explain_context_reads_the_cuda_of_a_vllm_tag(line: str, cuda: str, minimum: str) -> None:
    ctx = explain.context(HostFacts(), {}, line)
    assert (ctx["image_cuda"], ctx["image_minimum"]) == (cuda, minimum)


def test_explain_context_leaves_latest_unknown() -> None:
    ctx = explain.context(HostFacts(), {}, "docker run vllm/vllm-openai:latest --model m")
    assert ctx["image"] == "vllm/vllm-openai:latest" and "image_cuda" not in ctx


def test_error_804_from_a_vllm_tag_names_the_cuda_to_stay_on() -> None:
    log = (
        b"$ docker run --runtime nvidia --gpus all vllm/vllm-openai:v0.5.0 --model m\n"
        b"RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda "
        b"functions before calling NumCudaDevices() that might have already set an error? "
        b"Error 804: forward compatibility was attempted on non supported HW\n"
    )
    top = explain.diagnose(logscan.scan(io.BytesIO(log)), host=_host("dual3090_535"))[0]
    assert top.rule == "CTR-002"
    assert "built on CUDA 12.4" in top.message
    assert top.fix == "Upgrade the driver to >= 550.54.14, or use an image built on CUDA <= 12.2."


@pytest.mark.parametrize("host", ["dual3090_570", "dual3090_535", "h100_570", "dual3090_580"])
@pytest.mark.parametrize(
    "image",
    [
        ("v0.23.0",),
        ("v0.23.0", "NVIDIA_DISABLE_REQUIRE=true"),
        ("v0.23.0", "NVIDIA_DISABLE_REQUIRE=1", "VLLM_ENABLE_CUDA_COMPATIBILITY=1"),
        ("v0.16.0",),
        ("v0.9.0",),
        ("v0.5.0",),
    ],
    ids=lambda v: "+".join(v),
)
def test_check_from_an_inspect_judges_the_image_as_the_preflight_does(
    tmp_path: Path, host: str, image: tuple[str, ...]
) -> None:
    """`check --from facts.json inspect.json` and plan's preflight give one judgement on the
    rules the preflight runs (check also runs the host's own, CTR-003 among them)."""
    facts = _host(host)
    facts_file = tmp_path / "facts.json"
    facts_file.write_text(json.dumps({"schema_version": FACTS_SCHEMA_VERSION, **to_dict(facts)}))
    inspect_file = tmp_path / "inspect.json"
    inspect_file.write_text(_inspect(*image))
    checked = report.build(capture.load([str(facts_file), str(inspect_file)])).findings
    preflight_rules = {r.id for r in registry.routed("image")}
    from_check = [f.rule for f in checked if f.rule in preflight_rules]
    assert from_check == _rules(host, *image)
