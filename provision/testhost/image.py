"""The golden image: a minbase Debian bookworm from debootstrap, imported into podman.

Its tag names the recipe (the package list and RECIPE_VERSION), so a changed recipe builds a
new image and an unchanged one is reused.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import shutil
import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from provision.testhost.machine import Log, TestHostError, log_to_stderr, require, run
from provision.testhost.podman import image_exists, podman
from provision.testhost.state import Paths, locked, paths

RECIPE_VERSION = 1
SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
IMAGE_NAME = "localhost/gpuprov-testhost"
PACKAGES = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "python3",
    "python3-requests",
    "python3-apt",  # for Ansible's apt module
    "openssh-server",
    "iproute2",
    "procps",
    "ca-certificates",
    "curl",
    "sudo",
    "cmake",
    "build-essential",
    "git",
    "ccache",
    "libssl-dev",
    "nginx",
)


def mirror_from_sources(deb822: Iterable[str], one_line: Iterable[str], suite: str = SUITE) -> str:
    """The Debian mirror serving `suite`, from .sources (deb822) and sources.list texts."""
    for text in deb822:
        for stanza in re.split(r"\n\s*\n", text):
            fields: dict[str, str] = {}
            for line in stanza.splitlines():
                if line.startswith("#") or ":" not in line or line[:1].isspace():
                    continue
                key, _, value = line.partition(":")
                fields[key.strip().lower()] = value.strip()
            if (
                "deb" in fields.get("types", "").split()
                and suite in fields.get("suites", "").split()
                and fields.get("enabled", "yes").lower() != "no"
                and fields.get("uris")
            ):
                return fields["uris"].split()[0].rstrip("/")
    for text in one_line:
        for line in text.splitlines():
            words = re.sub(r"\[[^]]*\]", " ", line.split("#", 1)[0]).split()
            if len(words) >= 3 and words[0] == "deb" and words[2] == suite:
                return words[1].rstrip("/")
    return DEFAULT_MIRROR


def image_tag(packages: Sequence[str] = PACKAGES, recipe: int = RECIPE_VERSION) -> str:
    """12 hex digits naming the recipe: the package list and the recipe version."""
    text = f"{recipe}\n{SUITE}\n" + "\n".join(sorted(packages))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def image_ref(packages: Sequence[str] = PACKAGES, recipe: int = RECIPE_VERSION) -> str:
    """localhost/gpuprov-testhost:<tag>."""
    return f"{IMAGE_NAME}:{image_tag(packages, recipe)}"


def debootstrap_command(rootfs: Path, mirror: str, packages: Sequence[str] = PACKAGES) -> list[str]:
    """debootstrap a minbase bookworm with `packages` into `rootfs`."""
    return [
        "debootstrap",
        "--variant=minbase",
        f"--include={','.join(packages)}",
        SUITE,
        str(rootfs),
        mirror,
    ]


def machine_mirror() -> str:
    """The mirror this machine's apt uses for bookworm."""
    deb822 = [f.read_text() for f in sorted(Path("/etc/apt/sources.list.d").glob("*.sources"))]
    lists = [Path("/etc/apt/sources.list")]
    lists += sorted(Path("/etc/apt/sources.list.d").glob("*.list"))
    return mirror_from_sources(deb822, [f.read_text() for f in lists if f.exists()])


def _mounts_under(path: Path) -> list[str]:
    """Mount points at or under `path`, deepest first."""
    root = str(path.resolve())
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == root or point.startswith(root + "/"):
            points.append(point)
    return sorted(points, key=len, reverse=True)


def _remove_tree(path: Path) -> None:
    """rm -rf `path`, unmounting what debootstrap may have left mounted inside first."""
    if not path.exists():
        return
    for point in _mounts_under(path):
        run(["umount", "-l", point], check=False)
    if _mounts_under(path):
        raise TestHostError(f"{path} still has mounts inside; unmount them and remove it")
    shutil.rmtree(path)


def _customize(rootfs: Path) -> None:
    """Make the debootstrapped tree boot as a container reachable over SSH."""
    policy = rootfs / "usr/sbin/policy-rc.d"
    policy.write_text("#!/bin/sh\nexit 101\n")
    policy.chmod(0o755)
    # Each boot gets its own machine id (systemd makes one from the container's).
    (rootfs / "etc/machine-id").write_text("")
    with contextlib.suppress(FileNotFoundError):
        (rootfs / "var/lib/dbus/machine-id").unlink()
    if not list((rootfs / "etc/ssh").glob("ssh_host_*_key")):
        run(["chroot", str(rootfs), "ssh-keygen", "-A"])
    sshd = rootfs / "etc/ssh/sshd_config.d/gpuprov-testhost.conf"
    sshd.write_text("PermitRootLogin prohibit-password\nUseDNS no\n")
    (rootfs / "root/.ssh").mkdir(mode=0o700, exist_ok=True)
    # Units with nothing to do in a container.
    for unit in ("e2scrub_reap.service", "e2scrub_all.timer", "fstrim.timer"):
        (rootfs / "etc/systemd/system" / unit).unlink(missing_ok=True)
        (rootfs / "etc/systemd/system" / unit).symlink_to("/dev/null")
    for apt_cache in (rootfs / "var/cache/apt/archives").glob("*.deb"):
        apt_cache.unlink()
    policy.unlink()


def ensure_image(rebuild: bool = False, log: Log = log_to_stderr) -> str:
    """The golden image's reference, built first when missing (or when `rebuild`)."""
    require(build=False)
    p = paths()
    ref = image_ref()
    if not rebuild and image_exists(p, ref):
        return ref
    require(build=True)
    with locked(p):
        if not rebuild and image_exists(p, ref):
            return ref
        _build(p, ref, log)
    return ref


def _build(p: Paths, ref: str, log: Log) -> None:
    tag = ref.rsplit(":", 1)[1]
    rootfs, tarball = p.root / f"build-{tag}", p.root / f"build-{tag}.tar"
    build_log = p.root / "build.log"
    _remove_tree(rootfs)
    rootfs.mkdir()
    mirror = machine_mirror()
    try:
        start = time.monotonic()
        log(f"debootstrap {SUITE} from {mirror} into {rootfs} (1-3 min; log: {build_log})")
        with build_log.open("w") as out:
            command = debootstrap_command(rootfs, mirror)
            done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False)
        if done.returncode != 0:
            tail = "\n".join(build_log.read_text(errors="replace").splitlines()[-15:])
            raise TestHostError(f"debootstrap failed ({done.returncode}):\n{tail}")
        log(f"debootstrap done in {time.monotonic() - start:.0f} s; preparing the image")
        _customize(rootfs)
        start = time.monotonic()
        log(f"importing {ref}")
        run(["tar", "-C", str(rootfs), "--numeric-owner", "-cpf", str(tarball), "."], timeout=600)
        podman(p, "import", "--change", "CMD=/lib/systemd/systemd", str(tarball), ref, timeout=600)
        log(f"imported {ref} in {time.monotonic() - start:.0f} s")
    finally:
        tarball.unlink(missing_ok=True)
        _remove_tree(rootfs)
    _prune_images(p, ref)


def _prune_images(p: Paths, keep: str) -> None:
    """Remove older gpuprov-testhost images (and untagged ones) no container uses."""
    refs = podman(p, "images", "--format", "{{.Repository}}:{{.Tag}}", IMAGE_NAME, check=False)
    for old in refs.split():
        if old != keep and old.startswith(IMAGE_NAME + ":"):
            podman(p, "rmi", old, check=False)
    podman(p, "image", "prune", "-f", check=False)
