"""The container toolkit's ldcache failures name their own fix, and its driver failure reads as a
Windows-side fault only where the log shows WSL."""

from __future__ import annotations

import io

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
