"""The real llama-build.sh, run here against a stand-in llama.cpp source.

Real: the script, cmake, the C++ compiler, git, tar and flock. Stand-in: a tiny CMake project with
a `llama-server` target (prints a version, exits 0) in place of llama.cpp; CPU only, no GPU.
The CMake arguments are the ones the role passes for a CPU build (`provision.build.cmake_args`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

from provision.build import cmake_args

SCRIPT = Path(__file__).resolve().parent.parent / "roles" / "llama_cpp" / "files" / "llama-build.sh"
TOP = "fake-0.1/vendor/llama.cpp"

CMAKELISTS = """\
cmake_minimum_required(VERSION 3.18)
project(fake_llama LANGUAGES CXX)
set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
if(GGML_CUDA)
  enable_language(CUDA)
  add_executable(llama-server main.cpp kernel.cu)
else()
  add_executable(llama-server main.cpp)
endif()
"""

MAIN = """\
#include <cstdio>
#include <cstring>
#ifdef FAKE_CUDA
void launch();
#endif
int main(int argc, char **argv) {
  if (argc > 1 && std::strcmp(argv[1], "--version") == 0) {
    std::fprintf(stderr, "version: 1 (fake)\\n");
    return VERSION_EXIT;
  }
#ifdef FAKE_CUDA
  if (argc > 99) launch();
#endif
  return 0;
}
"""

KERNEL = """\
__global__ void kernel(int *out) { *out = 1; }
void launch() { kernel<<<1, 1>>>(nullptr); }
"""


def require(*tools: str) -> None:
    """Skip when a tool is missing, unless GPUPROV_E2E=required (then fail)."""
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        reason = f"needs {', '.join(missing)}"
        if os.environ.get("GPUPROV_E2E") == "required":
            pytest.fail(reason)
        pytest.skip(reason)


def fake_source(
    root: Path,
    *,
    cuda: bool = False,
    cmakelists: str = CMAKELISTS,
    version_exit: int = 0,
    main: str = MAIN,
) -> Path:
    """Write the stand-in llama.cpp tree (`root`/fake-llama) and return it."""
    src = root / "fake-llama"
    (src / "tools" / "server").mkdir(parents=True)
    (src / "tools" / "server" / "CMakeLists.txt").write_text("")
    (src / "CMakeLists.txt").write_text(cmakelists)
    defines = f"#define VERSION_EXIT {version_exit}\n" + ("#define FAKE_CUDA\n" if cuda else "")
    (src / "main.cpp").write_text(defines + main)
    if cuda:
        (src / "kernel.cu").write_text(KERNEL)
    return src


def pack(src: Path, tarball: Path) -> Path:
    """Pack a source tree like an sdist: fake-0.1/vendor/llama.cpp/..."""
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(src, arcname=TOP)
    return tarball


def fake_tarball(root: Path, **kwargs: Any) -> Path:
    """The stand-in (see fake_source) packed as root/fake-0.1.tar.gz."""
    root.mkdir(parents=True, exist_ok=True)
    return pack(fake_source(root, **kwargs), root / "fake-0.1.tar.gz")


def build(
    prefix: Path,
    name: str,
    source: list[str],
    args: tuple[str, ...] = (),
    expect: str = "",
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run llama-build.sh; `source` is --tarball/--git-url arguments."""
    argv = ["sh", str(SCRIPT), "--prefix", str(prefix), "--name", name, *source, "--jobs", "2"]
    if expect:
        argv += ["--expect-archs", expect]
    argv += ["--", *(args or cmake_args(()))]
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=300, env=env, cwd=cwd, check=False
    )


def git(*args: str, cwd: Path) -> None:
    env = {
        **os.environ,
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(cwd),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def assert_untouched(prefix: Path, name: str, current: str) -> None:
    """A failed build `name`: current still points at `current`, nothing of `name` is left."""
    assert os.readlink(prefix / "current") == f"builds/{current}"
    assert (prefix / "builds" / current / ".complete").is_file()
    assert not (prefix / "builds" / name).exists()
    assert not (prefix / "builds" / f".{name}.partial").exists()
    assert not (prefix / "work" / name).exists()


@pytest.fixture(scope="module")
def tools() -> None:
    require("cmake", "c++", "git", "tar", "flock")


@pytest.fixture(scope="module")
def built(tools: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A prefix with one complete build, `first`, that `current` points at."""
    root = tmp_path_factory.mktemp("built")
    done = build(root / "prefix", "first", ["--tarball", str(fake_tarball(root / "src"))])
    assert done.returncode == 0, done.stdout + done.stderr
    return root / "prefix"


@pytest.fixture
def prefix(built: Path, tmp_path: Path) -> Path:
    """A private copy of the built prefix."""
    return Path(shutil.copytree(built, tmp_path / "prefix", symlinks=True))


@pytest.fixture(scope="module")
def remote(tools: None, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A local bare git repository holding the stand-in source, tagged v0.1."""
    root = tmp_path_factory.mktemp("git")
    src = fake_source(root)
    git("init", "-q", "--bare", str(root / "remote.git"), cwd=root)
    git("init", "-q", cwd=src)
    git("add", ".", cwd=src)
    git("commit", "-q", "-m", "fake", cwd=src)
    git("tag", "v0.1", cwd=src)
    git("push", "-q", str(root / "remote.git"), "HEAD:refs/heads/main", "v0.1", cwd=src)
    return f"file://{root / 'remote.git'}"


def test_first_build_is_complete(built: Path) -> None:
    dest = built / "builds" / "first"
    assert os.readlink(built / "current") == "builds/first"
    assert os.access(dest / "bin" / "llama-server", os.X_OK)
    assert "version: 1 (fake)" in (dest / "version.txt").read_text()
    assert (dest / "cmake-args.txt").read_text().splitlines() == list(cmake_args(()))
    assert (dest / ".complete").is_file()
    assert not (built / "work" / "first").exists()
    assert not list((built / "builds").glob(".*.partial"))


def test_rerun_switches_without_rebuilding(prefix: Path) -> None:
    binary = prefix / "builds" / "first" / "bin" / "llama-server"
    mtime = binary.stat().st_mtime_ns
    (prefix / "current").unlink()
    done = build(prefix, "first", ["--tarball", "/nonexistent.tar.gz"])
    assert done.returncode == 0, done.stderr
    assert "already built" in done.stdout
    assert "configuring" not in done.stdout
    assert binary.stat().st_mtime_ns == mtime
    assert os.readlink(prefix / "current") == "builds/first"


def test_second_build_switches_current(prefix: Path, tmp_path: Path) -> None:
    tarball = fake_tarball(tmp_path / "src")
    done = build(prefix, "second", ["--tarball", str(tarball), "--subdir", "vendor/llama.cpp"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "current -> builds/second" in done.stdout
    assert os.readlink(prefix / "current") == "builds/second"
    assert (prefix / "builds" / "first" / ".complete").is_file()
    assert (prefix / "builds" / "second" / ".complete").is_file()


def test_the_compiler_runs_in_one_locale_whoever_builds(prefix: Path, tmp_path: Path) -> None:
    """ccache hashes LANG, LC_ALL, LC_CTYPE and LC_MESSAGES: a build started from a German shell
    and one started by Ansible (C.UTF-8) must give the compiler the same values to share it."""
    seen = tmp_path / "locale.txt"
    launcher = tmp_path / "launcher.sh"
    launcher.write_text(
        "#!/bin/sh\n"
        f'echo "LANG=$LANG LC_ALL=$LC_ALL LC_CTYPE=${{LC_CTYPE-unset}}'
        f' LC_MESSAGES=${{LC_MESSAGES-unset}}" >> {seen}\n'
        'exec "$@"\n'
    )
    launcher.chmod(0o755)
    args = (*cmake_args(()), f"-DCMAKE_CXX_COMPILER_LAUNCHER={launcher}")
    env = {**os.environ, "LANG": "de_DE.UTF-8", "LC_CTYPE": "de_DE.UTF-8", "LC_MESSAGES": "de"}
    tarball = ["--tarball", str(fake_tarball(tmp_path / "src"))]
    done = build(prefix, "localised", tarball, args=args, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert set(seen.read_text().splitlines()) == {
        "LANG=C LC_ALL=C LC_CTYPE=unset LC_MESSAGES=unset"
    }


@pytest.mark.parametrize(
    ("broken", "why"),
    [
        pytest.param({"cmakelists": CMAKELISTS + "add_executable(\n"}, "Parse error", id="cmake"),
        pytest.param({"main": MAIN + "int broken(\n"}, "error:", id="compile"),
    ],
)
def test_failed_tarball_build_leaves_current(
    prefix: Path, tmp_path: Path, broken: dict[str, object], why: str
) -> None:
    done = build(prefix, "broken", ["--tarball", str(fake_tarball(tmp_path / "src", **broken))])
    assert done.returncode != 0
    assert why in done.stderr
    assert "current -> builds/broken" not in done.stdout
    assert_untouched(prefix, "broken", "first")


def test_binary_that_does_not_run_leaves_current(prefix: Path, tmp_path: Path) -> None:
    done = build(prefix, "bad", ["--tarball", str(fake_tarball(tmp_path / "src", version_exit=1))])
    assert done.returncode != 0
    assert "does not run" in done.stderr and "version: 1 (fake)" in done.stderr
    assert_untouched(prefix, "bad", "first")


def test_git_bad_ref_leaves_current(prefix: Path, remote: str) -> None:
    """The fetch is tried --fetch-attempts times, each attempt shown, then the build fails."""
    source = ["--git-url", remote, "--ref", "does-not-exist"]
    done = build(prefix, "bad-ref", [*source, "--fetch-attempts", "2", "--retry-delay", "0"])
    assert done.returncode != 0
    assert "does-not-exist" in done.stderr
    assert "(attempt 1/2)" in done.stdout and "(attempt 2/2)" in done.stdout
    assert "fetching does-not-exist failed 2 times" in done.stderr
    assert_untouched(prefix, "bad-ref", "first")


def test_git_tag_builds(prefix: Path, remote: str) -> None:
    done = build(prefix, "v0.1", ["--git-url", remote, "--ref", "v0.1"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert os.readlink(prefix / "current") == "builds/v0.1"
    assert "version: 1 (fake)" in (prefix / "builds" / "v0.1" / "version.txt").read_text()
    assert not (prefix / "work" / "v0.1").exists()


def test_tarball_without_llama_cpp_fails(prefix: Path, tmp_path: Path) -> None:
    """A tarball with no tools/server/CMakeLists.txt is refused, whatever the cwd holds."""
    src = fake_source(tmp_path)
    (src / "tools" / "server" / "CMakeLists.txt").unlink()
    tarball = pack(src, tmp_path / "not-llama.tar.gz")
    done = build(prefix, "not-llama", ["--tarball", str(tarball)], cwd=src)
    assert done.returncode != 0
    assert_untouched(prefix, "not-llama", "first")
