"""Readers added for capture set 5: glxinfo's OpenGL strings and clinfo's long form; each reads
NVIDIA's own lines and leaves look-alikes (Mesa, other OpenCL platforms) alone."""

from __future__ import annotations

from checks.facts import capture
from checks.facts.parsers import clinfo, driver_banners, glxinfo

GLXINFO = (
    "OpenGL vendor string: NVIDIA Corporation\n"
    "OpenGL renderer string: GeForce GTX 1050/PCIe/SSE2\n"
    "OpenGL core profile version string: 4.6.0 NVIDIA 396.54\n"
    "OpenGL ES profile version string: OpenGL ES 3.2 NVIDIA 396.54\n"
)


def test_glxinfo_gives_the_renderer_and_the_driver() -> None:
    facts = glxinfo.parse_glxinfo(GLXINFO)
    assert facts.driver.version == "396.54"
    assert [g.name for g in facts.gpus] == ["GeForce GTX 1050"]


def test_glxgears_strings_read_the_same() -> None:
    text = "GL_RENDERER   = GeForce GTX 1050/PCIe/SSE2\nGL_VERSION    = 4.6.0 NVIDIA 396.54\n"
    facts = glxinfo.parse_glxinfo(text)
    assert (facts.driver.version, [g.name for g in facts.gpus]) == ("396.54", ["GeForce GTX 1050"])


def test_mesa_and_nouveau_are_not_nvidia_s_driver() -> None:
    """Near misses: Mesa's version strings and nouveau's renderer name no NVIDIA driver."""
    for text in (
        "OpenGL renderer string: NV137\nOpenGL version string: 4.3 (Compatibility Profile)"
        " Mesa 23.2.1\n",
        "OpenGL renderer string: llvmpipe (LLVM 15.0.7, 256 bits)\n"
        "OpenGL core profile version string: 4.5 (Core Profile) Mesa 23.0.4\n",
        "The string NVIDIA 396.54 in prose\n",
    ):
        assert not glxinfo.detect_glxinfo(text)
        assert glxinfo.parse_glxinfo(text).driver.version is None


def test_a_gpu_lspci_names_is_not_counted_twice() -> None:
    text = "01:00.0 3D controller: NVIDIA Corporation GM107GLM [Quadro M2000M]\n" + GLXINFO.replace(
        "GeForce GTX 1050", "Quadro M2000M"
    )
    assert glxinfo.parse_glxinfo(text).gpus == []


def test_the_summary_pair_needs_both_lines() -> None:
    pair = "GPU: NVIDIA GeForce RTX 5070 Ti\nDriver: NVIDIA 590.48.01\n"
    facts = glxinfo.parse_glxinfo(pair)
    assert (facts.driver.version, [g.name for g in facts.gpus]) == (
        "590.48.01",
        ["NVIDIA GeForce RTX 5070 Ti"],
    )
    assert not glxinfo.detect_glxinfo("GPU: NVIDIA GeForce RTX 5070 Ti\nDriver: nvidia\n")
    assert not glxinfo.detect_glxinfo("GPU: AMD Radeon RX 7900\nDriver: NVIDIA 590.48.01\n")


CLINFO = (
    "Number of platforms                               2\n"
    "  Platform Name                                   Intel(R) OpenCL\n"
    "  Platform Version                                OpenCL 2.1 LINUX\n"
    "  Platform Name                                   NVIDIA CUDA\n"
    "  Platform Version                                OpenCL 3.0 CUDA 11.4.112\n"
    "\n"
    "  Platform Name                                   Intel(R) OpenCL\n"
    "Number of devices                                 1\n"
    "  Device Name                                     Intel(R) Core(TM) i7-6700K CPU\n"
    "  Driver Version                                  18.1.0.0920\n"
    "  Platform Name                                   NVIDIA CUDA\n"
    "Number of devices                                 1\n"
    "  Device Name                                     Quadro P4000\n"
    "  Driver Version                                  470.63.01\n"
    "\n"
    "NULL platform behavior\n"
    "  clCreateContext(NULL, ...) [default]            Success [NV]\n"
    "    Device Name                                   Quadro P4000\n"
)


def test_clinfo_reads_only_nvidia_s_platform() -> None:
    facts = clinfo.parse_clinfo(CLINFO)
    assert (facts.driver.version, facts.driver.cuda_version) == ("470.63.01", "11.4")
    assert [g.name for g in facts.gpus] == ["Quadro P4000"]


def test_clinfo_without_an_nvidia_platform_is_not_read() -> None:
    """Near miss: POCL's CUDA device is not NVIDIA's OpenCL and gives no driver."""
    text = (
        "  Platform Name                                   Portable Computing Language\n"
        "  Platform Version                                OpenCL 1.2 pocl 1.8 CUDA\n"
        "  Device Name                                     pthread-Intel(R) Core(TM) i7\n"
        "  Driver Version                                  1.8\n"
    )
    assert not clinfo.detect_clinfo(text)
    facts = clinfo.parse_clinfo(text)
    assert (facts.driver.version, facts.gpus) == (None, [])


def test_clinfo_reads_through_capture() -> None:
    facts, seen = capture.recognise(capture.clean(CLINFO))
    assert "clinfo" in seen
    assert facts.driver.version == "470.63.01"


def test_driver_banners_give_the_glx_and_modeset_versions() -> None:
    text = (
        "[  5928.562] (II) NVIDIA GLX Module  334.21  Thu Feb 27 13:54:04 PST 2014\n"
        "[   14.762771] nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX"
        " platforms  390.67  Fri Jun  1 03:15:43 PDT 2018\n"
    )
    facts = driver_banners.parse_driver_banners(text)
    assert (facts.driver.version, facts.driver.kernel_module_version) == ("334.21", "390.67")


def test_banner_look_alikes_are_not_read() -> None:
    """Near misses: prose naming the module, a failed GLX load with no version."""
    for text in (
        "I think the NVIDIA GLX Module 334.21 is broken\n",
        "[  5928.562] (EE) NVIDIA GLX Module failed to load\n",
        "nvidia-modeset: Unloading\n",
    ):
        assert not driver_banners.detect_driver_banners(text)
