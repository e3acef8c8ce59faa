"""The CUDA keyring download runs as root: into a private folder, never a fixed path in /tmp.

Real: build.cuda_keyring_command under /bin/sh, with stand-ins for curl and dpkg on PATH that
record where the file went and its folder's mode.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from provision import build

CURL = """#!/bin/sh
while [ "$1" != -o ]; do shift; done
printf 'deb' > "$2"
stat -c %a "${2%/*}" > "$LOG/mode"
printf '%s\\n' "$2" > "$LOG/path"
"""
DPKG = """#!/bin/sh
cat "$2" > "$LOG/installed"
"""


def test_the_keyring_goes_through_a_private_folder_that_is_removed(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("curl", CURL), ("dpkg", DPKG)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    planted = tmp_path / "tmp"
    planted.mkdir()
    (planted / "cuda-keyring.deb").symlink_to(tmp_path / "victim")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "LOG": str(tmp_path)}
    env["TMPDIR"] = str(planted)
    command = build.cuda_keyring_command("ubuntu2204/x86_64")
    done = subprocess.run(["sh", "-c", command], env=env, timeout=30, check=False)
    assert done.returncode == 0
    assert "/tmp/cuda-keyring.deb" not in command
    used = Path((tmp_path / "path").read_text().strip())
    assert used.parent.parent == planted
    assert (tmp_path / "mode").read_text().strip() == "700"
    assert (tmp_path / "installed").read_text() == "deb"
    assert not used.parent.exists()
    assert not (tmp_path / "victim").exists()
    assert stat.S_ISLNK((planted / "cuda-keyring.deb").lstat().st_mode)
