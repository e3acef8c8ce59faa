"""nvidia-smi's driver failure reads as a Windows-side fault only where the log shows WSL."""

from __future__ import annotations

import io

import pytest

from checks.logs import explain, logscan

SMI = (
    b"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
    b"that the latest NVIDIA driver is installed and running.\n"
)


def _top(data: bytes) -> explain.Diagnosis:
    return explain.diagnose(logscan.scan(io.BytesIO(data)))[0]


@pytest.mark.parametrize(
    "before",
    [
        b"Linux box 5.15.167.4-microsoft-standard-WSL2 #1 SMP x86_64 GNU/Linux\n",
        b"Linux box 4.19.128-microsoft-standard #1 SMP x86_64 GNU/Linux\n",
        b"PS C:\\Users\\dev> wsl -d Ubuntu-22.04\n",
        b"$ ls /usr/lib/wsl/lib\n",
        b"Same error in WSL2 after the update:\n",
    ],
)
def test_wsl_in_sight_names_the_windows_driver(before: bytes) -> None:
    top = _top(before + b"$ nvidia-smi\n" + SMI)
    assert (top.signature, top.rule) == ("wsl-smi-no-driver", "HOST-007")
    assert "wsl --update" in top.fix


@pytest.mark.parametrize(
    "before",
    [
        b"me@DESKTOP-930EG0A:~$ nvidia-smi\n",
        b"Linux gpu1 6.8.0-45-generic #45-Ubuntu SMP x86_64 GNU/Linux\n",
        # WSL named too far above the failure to speak for it
        b"Tested in WSL2 last year.\n" + b"step\n" * 60,
    ],
)
def test_without_wsl_it_stays_the_native_reading(before: bytes) -> None:
    top = _top(before + SMI)
    assert top.signature == "smi-failed"
    assert "Secure Boot" in top.fix and "WSL2" in top.fix
