"""The container toolkit's ldcache failures name their own fix, its driver failure reads as a
Windows-side fault only where the log shows WSL, and enroot's hook failing after libnvidia-container
1.17.7 dropped its flags is that regression, not the refusal it caused."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from checks.logs import explain, logscan

RPC = (
    b"docker: Error response from daemon: OCI runtime create failed: Running hook #0:: error "
    b"running hook: exit status 1, stdout: , stderr: nvidia-container-cli: initialization error: "
    b"driver error: failed to process request: unknown.\n"
)


def _top(data: bytes) -> explain.Diagnosis:
    return explain.diagnose(logscan.scan(io.BytesIO(data)))[0]


@pytest.mark.parametrize(
    ("line", "in_message", "in_fix"),
    [
        (
            b"nvidia-container-cli: ldcache error: open failed: /sbin/ldconfig.real: no such file"
            b" or directory: unknown.\n",
            "/sbin/ldconfig.real, the host ldconfig",
            'ldconfig = "@<that path>"',
        ),
        (
            b"nvidia-container-cli: ldcache error: process /sbin/ldconfig failed with error code:"
            b" 127\n",
            "code 127",
            '"@/sbin/ldconfig.real"',
        ),
        (
            b"nvidia-container-cli: ldcache error: process /usr/sbin/ldconfig failed with error"
            b" code: 1\n",
            "exit code 1",
            "--ldconfig",
        ),
    ],
)
def test_each_ldcache_failure_gets_its_own_fix(line: bytes, in_message: str, in_fix: str) -> None:
    top = _top(line)
    assert (top.signature, top.rule) == ("ctk-ldcache-ldconfig-failed", "CTR-021")
    assert in_message in top.message and in_fix in top.fix
    assert "{" not in top.message + top.fix


@pytest.mark.parametrize(
    "before",
    [
        b"Linux box 5.15.167.4-microsoft-standard-WSL2 #1 SMP x86_64 GNU/Linux\n",
        b"PS C:\\Users\\dev> wsl -d Ubuntu-22.04\n",
        b"- WSL 2 backend is enabled in Docker Desktop\n",
    ],
)
def test_driver_failure_with_wsl_in_sight_names_windows(before: bytes) -> None:
    top = _top(before + RPC)
    assert (top.signature, top.rule) == ("wsl-ctk-driver-rpc-error", "CTR-022")
    assert "nvidia-smi.exe" in top.fix and "persistence" not in top.fix


@pytest.mark.parametrize(
    "before",
    [
        b"root@DESKTOP-5B7Q2LM:/home/me# docker run --rm --gpus all nvidia/cuda:11.0-base\n",
        b"Linux gpu1 6.8.0-45-generic #45-Ubuntu SMP x86_64 GNU/Linux\n",
        b"Tested in WSL2 last year.\n" + b"step\n" * 60,
    ],
)
def test_without_wsl_the_driver_failure_stays_native(before: bytes) -> None:
    top = _top(before + RPC)
    assert (top.signature, top.rule) == ("ctk-driver-rpc-error", "CTR-018")
    assert "persistence" in top.fix


SIGNATURES = Path(__file__).parent / "fixtures" / "signatures"
EBPF_LINE = next(
    line
    for line in (SIGNATURES / "ctk-ebpf-device-filter-refused" / "match_gpustack_debian12.log")
    .read_bytes()
    .splitlines()
    if b"bpf_prog_query" in line
)
CALL = b"bpf_prog_query(BPF_CGROUP_DEVICE) failed"


def _file(folder: str, name: str) -> list[explain.Diagnosis]:
    with (SIGNATURES / folder / name).open("rb") as stream:
        return explain.diagnose(logscan.scan(stream))


@pytest.mark.parametrize("cut", range(len(CALL)))
def test_an_ebpf_refusal_hard_wrapped_inside_the_call_is_still_read(cut: int) -> None:
    """A paste wrapped at any point of "bpf_prog_query(BPF_CGROUP_DEVICE) failed"."""
    at = EBPF_LINE.index(CALL) + cut
    wrapped = EBPF_LINE[:at] + b"\n" + EBPF_LINE[at:] + b"\n"
    assert "ctk-ebpf-device-filter-refused" in logscan.scan(io.BytesIO(wrapped)).hits


def test_enroot_hook_refused_after_its_flags_were_dropped_is_the_1177_regression() -> None:
    found = _file("ctk-1177-regression", "match_pyxis_devices_allow_arm64.log")
    top = found[0]
    assert (top.signature, top.rule) == ("ctk-1177-regression", "CTR-026")
    assert "1.17.8" in top.fix and "1.17.6" in top.fix
    assert "rootless-cgroups" in [d.signature for d in found[1:]]


def test_dockers_own_hook_refused_by_ebpf_is_not_the_1177_regression() -> None:
    found = _file("ctk-1177-regression", "near_docker_rootful_ebpf.log")
    assert [d.signature for d in found] == ["ctk-ebpf-device-filter-refused"]
    assert "1.18" in found[0].fix


def test_fabric_manager_socket_refused_to_a_user_names_the_cli_upgrade() -> None:
    (top,) = _file("ctk-fm-socket-permission", "match_enroot_b200.log")
    assert (top.signature, top.rule) == ("ctk-fm-socket-permission", "CTR-027")
    assert "1.17.8" in top.fix and "mode 600" in top.message
