"""Root causes that must rank above the symptom they produce, and wordings that must not match."""

from __future__ import annotations

import io

from checks.logs import explain, logscan


def _signatures(text: str) -> list[str]:
    found = explain.diagnose(logscan.scan(io.BytesIO(text.encode()), use_grep=False))
    return [d.signature for d in found]


def test_a_module_that_did_not_build_outranks_smi_failed() -> None:
    text = (
        "ERROR: modpost: GPL-incompatible module nvidia.ko uses GPL-only symbol "
        "'rcu_read_unlock_strict'\n"
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.\n"
    )
    assert _signatures(text)[0] == "driver-module-gpl-only-symbol"


def test_gpl_only_symbol_names_the_module_and_symbol() -> None:
    text = "ERROR: modpost: GPL-incompatible module nvidia-drm.ko uses GPL-only symbol 'x_y'\n"
    found = explain.diagnose(logscan.scan(io.BytesIO(text.encode()), use_grep=False))
    assert "nvidia-drm.ko" in found[0].message
    assert "'x_y'" in found[0].message


def test_device_plugin_nvml_is_not_the_host_library_finding() -> None:
    text = (
        "I0121 12:04:24.666347       1 factory.go:107] Detected non-NVML platform: could not "
        "load NVML library: libnvidia-ml.so.1: cannot open shared object file: No such file or "
        "directory\n"
    )
    assert _signatures(text) == ["k8s-plugin-nvml-not-loaded"]


def test_application_profile_hook_needs_the_read_only_error() -> None:
    hook = "mkdirat etc/nvidia/nvidia-application-profiles-rc.d: "
    assert _signatures(hook + "read-only file system\n") == ["ctk-app-profile-hook-readonly"]
    assert _signatures(hook + "no space left on device\n") == []
