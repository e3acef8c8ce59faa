"""Test hosts: systemd containers in their own network namespaces, reached over SSH.

Each host runs /lib/systemd/systemd as PID 1 under podman (runc) from a golden Debian image
built with debootstrap. Host N lives in network namespace gp-NAME and answers on 10.213.N.2;
the machine's side of its veth pair is 10.213.N.1. Nothing else is exposed.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

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
SUBNET = "10.213"
MAX_INDEX = 200
BOOT_TIMEOUT = 60.0
CCACHE_MOUNT = "/var/cache/gpuprov/ccache"
LABEL = "gpuprov.testhost"
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$")
_VETH = re.compile(r"^\d+:\s+gph(\d+)[@:]")

Log = Callable[[str], None]


class TestHostError(RuntimeError):
    """A test host could not be built, started or stopped; the message says what to do."""

    __test__ = False  # not a pytest class


@dataclass(frozen=True)
class Paths:
    """Where the test host state lives."""

    root: Path

    @property
    def containers_conf(self) -> Path:
        return self.root / "containers.conf"

    @property
    def storage_conf(self) -> Path:
        return self.root / "storage.conf"

    @property
    def storage(self) -> Path:
        return self.root / "storage"

    @property
    def runroot(self) -> Path:
        """podman's run state: under /run, one folder per state dir."""
        digest = hashlib.sha256(str(self.root).encode()).hexdigest()[:12]
        return Path("/run/gpuprov-testhosts") / digest

    @property
    def ssh_key(self) -> Path:
        return self.root / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.root / "known_hosts"

    @property
    def hosts(self) -> Path:
        return self.root / "hosts"

    @property
    def ccache(self) -> Path:
        return self.root / "ccache"

    @property
    def lock(self) -> Path:
        return self.root / "lock"


@dataclass(frozen=True)
class TestHost:
    """A running test host and how to reach it."""

    __test__ = False  # not a pytest class

    name: str
    index: int
    address: str
    container: str
    netns: str
    ssh_key: Path
    known_hosts: Path

    def record(self) -> dict[str, Any]:
        """The JSON record kept in the state dir."""
        return {k: v for k, v in asdict(self).items() if k not in ("ssh_key", "known_hosts")}

    def to_json(self) -> dict[str, Any]:
        """Everything, paths as strings."""
        return {**self.record(), "ssh_key": str(self.ssh_key), "known_hosts": str(self.known_hosts)}


def _stderr(message: str) -> None:
    print(f"testhost: {message}", file=sys.stderr, flush=True)


# --- pure parts -------------------------------------------------------------------------------


def state_dir(env: dict[str, str] | os._Environ[str] | None = None) -> Path:
    """$GPUPROV_TESTHOST_DIR, else ~/.cache/gpuprov/testhosts."""
    env = os.environ if env is None else env
    value = env.get("GPUPROV_TESTHOST_DIR")
    return Path(value).expanduser() if value else Path.home() / ".cache/gpuprov/testhosts"


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


def containers_conf_text() -> str:
    """podman engine settings that work here: runc, and ulimits a root container may set."""
    return (
        "[containers]\n"
        'default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]\n'
        "\n"
        "[engine]\n"
        'runtime = "runc"\n'
    )


def storage_conf_text(paths: Paths) -> str:
    """Image and container storage in the state dir."""
    return (
        "[storage]\n"
        'driver = "overlay"\n'
        f"graphroot = {json.dumps(str(paths.storage))}\n"
        f"runroot = {json.dumps(str(paths.runroot))}\n"
    )


def podman_env(paths: Paths, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment every podman call runs with."""
    env = dict(os.environ if base is None else base)
    env["CONTAINERS_CONF"] = str(paths.containers_conf)
    env["CONTAINERS_STORAGE_CONF"] = str(paths.storage_conf)
    return env


def check_name(name: str) -> str:
    """`name` if it is a valid test host name (lowercase letters, digits, inner dashes)."""
    if not _NAME.match(name):
        raise TestHostError(
            f"bad test host name {name!r}: use 1-32 lowercase letters, digits and inner dashes"
        )
    return name


def netns_name(name: str) -> str:
    return f"gp-{name}"


def container_name(name: str) -> str:
    return f"gp-{name}"


def veth_name(index: int) -> str:
    """The machine's end of host `index`'s veth pair."""
    return f"gph{index}"


def address(index: int) -> str:
    """The host's address inside its namespace."""
    return f"{SUBNET}.{index}.2"


def gateway(index: int) -> str:
    """The machine's address facing host `index`."""
    return f"{SUBNET}.{index}.1"


def pick_index(used: Iterable[int]) -> int:
    """The lowest free index in 1..MAX_INDEX."""
    taken = set(used)
    for index in range(1, MAX_INDEX + 1):
        if index not in taken:
            return index
    raise TestHostError(f"all {MAX_INDEX} test host slots are taken: bring some down")


def veth_indexes(ip_link_output: str) -> set[int]:
    """Indexes of gphN links in `ip -o link` output."""
    return {int(m.group(1)) for m in map(_VETH.match, ip_link_output.splitlines()) if m}


def netns_commands(name: str, index: int) -> list[list[str]]:
    """Make the namespace, its veth pair and addresses."""
    ns, veth = netns_name(name), veth_name(index)
    return [
        ["ip", "netns", "add", ns],
        ["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns],
        # No IPv6 link-local addresses: the pair carries only 10.213.N.0/24.
        ["ip", "link", "set", veth, "addrgenmode", "none"],
        ["ip", "-n", ns, "link", "set", "eth0", "addrgenmode", "none"],
        ["ip", "addr", "add", f"{gateway(index)}/24", "dev", veth],
        ["ip", "link", "set", veth, "up"],
        ["ip", "-n", ns, "addr", "add", f"{address(index)}/24", "dev", "eth0"],
        ["ip", "-n", ns, "link", "set", "lo", "up"],
        ["ip", "-n", ns, "link", "set", "eth0", "up"],
    ]


def parse_volume(spec: str) -> tuple[str, str]:
    """SRC:DST (SRC made absolute; DST absolute) from a --volume value."""
    src, sep, dst = spec.partition(":")
    if not sep or not src or not dst.startswith("/") or ":" in dst:
        raise TestHostError(f"bad volume {spec!r}: use SRC:DST with an absolute DST")
    return str(Path(src).expanduser().absolute()), dst


def run_command(
    name: str, image: str, pubkey: Path, volumes: Sequence[tuple[str, str]] = ()
) -> list[str]:
    """podman run for host `name`: systemd as PID 1 in the host's namespace."""
    command = [
        "podman",
        "run",
        "-d",
        "--name",
        container_name(name),
        "--hostname",
        name,
        "--label",
        f"{LABEL}={name}",
        "--network",
        f"ns:/run/netns/{netns_name(name)}",
        "--systemd=always",
        "-v",
        f"{pubkey}:/root/.ssh/authorized_keys:ro",
    ]
    for src, dst in volumes:
        command += ["-v", f"{src}:{dst}"]
    return [*command, image, "/lib/systemd/systemd"]


def ssh_options(key: Path, known_hosts: Path) -> list[str]:
    """ssh options for a test host: our key only, our known_hosts, no prompts."""
    return [
        "-F",
        "none",
        "-i",
        str(key),
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=accept-new",
        "-o",
        f"UserKnownHostsFile={known_hosts}",
        "-o",
        "HashKnownHosts=no",
        "-o",
        "ConnectTimeout=5",
        "-o",
        "LogLevel=ERROR",
    ]


def ssh_command(host: TestHost, *remote: str) -> list[str]:
    """ssh root@host running `remote` (one shell command line, or words ssh joins)."""
    return ["ssh", *ssh_options(host.ssh_key, host.known_hosts), f"root@{host.address}", *remote]


def pyinfra_host(host: TestHost) -> tuple[str, dict[str, Any]]:
    """(name, data) for a pyinfra inventory: root over SSH with the test host key."""
    return host.address, {
        "ssh_user": "root",
        "ssh_key": str(host.ssh_key),
        "ssh_known_hosts_file": str(host.known_hosts),
        "ssh_strict_host_key_checking": "accept-new",
    }


# --- the machine ------------------------------------------------------------------------------


def _run(
    command: Sequence[str],
    env: dict[str, str] | None = None,
    check: bool = True,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(
            list(command), capture_output=True, text=True, env=env, timeout=timeout, check=False
        )
    except FileNotFoundError:
        raise TestHostError(f"{command[0]} is not installed") from None
    except subprocess.TimeoutExpired:
        raise TestHostError(f"timed out after {timeout:.0f} s: {' '.join(command)}") from None
    if check and done.returncode != 0:
        output = (done.stderr or done.stdout).strip()
        raise TestHostError(f"{' '.join(command)} failed ({done.returncode}): {output}")
    return done


_TOOLS = {
    "podman": "apt-get install podman runc",
    "runc": "apt-get install runc",
    "ip": "apt-get install iproute2",
    "ssh": "apt-get install openssh-client",
    "ssh-keygen": "apt-get install openssh-client",
    "tar": "apt-get install tar",
    "debootstrap": "apt-get install debootstrap",
}


def missing_requirements(build: bool = True) -> list[str]:
    """What this machine lacks to run test hosts (to build the image too when `build`)."""
    problems = []
    if os.geteuid() != 0:
        problems.append("test hosts need root (network namespaces, podman with systemd)")
    for tool, fix in _TOOLS.items():
        if (build or tool != "debootstrap") and shutil.which(tool) is None:
            problems.append(f"{tool} is missing: {fix}")
    return problems


def _require(build: bool = True) -> None:
    problems = missing_requirements(build)
    if problems:
        raise TestHostError("; ".join(problems))


def paths() -> Paths:
    """The state dir, with its config files and SSH key in place."""
    p = Paths(state_dir())
    p.hosts.mkdir(parents=True, exist_ok=True)
    for path, text in (
        (p.containers_conf, containers_conf_text()),
        (p.storage_conf, storage_conf_text(p)),
    ):
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    if not p.ssh_key.exists():
        keygen = ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gpuprov-testhost"]
        _run([*keygen, "-f", str(p.ssh_key)])
    p.known_hosts.touch()
    return p


@contextlib.contextmanager
def _locked(p: Paths) -> Iterator[None]:
    with p.lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _podman(p: Paths, *args: str, check: bool = True, timeout: float = 120) -> str:
    return _run(["podman", *args], env=podman_env(p), check=check, timeout=timeout).stdout


def _image_exists(p: Paths, ref: str) -> bool:
    env = podman_env(p)
    return _run(["podman", "image", "exists", ref], env=env, check=False).returncode == 0


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
        _run(["umount", "-l", point], check=False)
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
        _run(["chroot", str(rootfs), "ssh-keygen", "-A"])
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


def ensure_image(rebuild: bool = False, log: Log = _stderr) -> str:
    """The golden image's reference, built first when missing (or when `rebuild`)."""
    _require(build=False)
    p = paths()
    ref = image_ref()
    if not rebuild and _image_exists(p, ref):
        return ref
    _require(build=True)
    with _locked(p):
        if not rebuild and _image_exists(p, ref):
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
        _run(["tar", "-C", str(rootfs), "--numeric-owner", "-cpf", str(tarball), "."], timeout=600)
        _podman(p, "import", "--change", "CMD=/lib/systemd/systemd", str(tarball), ref, timeout=600)
        log(f"imported {ref} in {time.monotonic() - start:.0f} s")
    finally:
        tarball.unlink(missing_ok=True)
        _remove_tree(rootfs)
    _prune_images(p, ref)


def _prune_images(p: Paths, keep: str) -> None:
    """Remove older gpuprov-testhost images (and untagged ones) no container uses."""
    refs = _podman(p, "images", "--format", "{{.Repository}}:{{.Tag}}", IMAGE_NAME, check=False)
    for old in refs.split():
        if old != keep and old.startswith(IMAGE_NAME + ":"):
            _podman(p, "rmi", old, check=False)
    _podman(p, "image", "prune", "-f", check=False)


def _record_path(p: Paths, name: str) -> Path:
    return p.hosts / f"{name}.json"


def _load(p: Paths, path: Path) -> TestHost | None:
    try:
        data = json.loads(path.read_text())
        return TestHost(
            name=data["name"],
            index=int(data["index"]),
            address=data["address"],
            container=data["container"],
            netns=data["netns"],
            ssh_key=p.ssh_key,
            known_hosts=p.known_hosts,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def list_hosts() -> list[TestHost]:
    """Hosts with a record in the state dir, by index."""
    p = Paths(state_dir())
    if not p.hosts.is_dir():
        return []
    found = (_load(p, path) for path in sorted(p.hosts.glob("*.json")))
    return sorted((h for h in found if h), key=lambda h: h.index)


def _netns_exists(ns: str) -> bool:
    return Path("/run/netns", ns).exists()


def _running(p: Paths, container: str) -> bool:
    out = _podman(p, "container", "inspect", "-f", "{{.State.Running}}", container, check=False)
    return out.strip() == "true"


def _forget_host_key(p: Paths, addr: str) -> None:
    _run(["ssh-keygen", "-R", addr, "-f", str(p.known_hosts)], check=False)
    Path(f"{p.known_hosts}.old").unlink(missing_ok=True)


def _wait_for_banner(addr: str, deadline: float) -> None:
    while True:
        try:
            with socket.create_connection((addr, 22), timeout=2) as conn:
                conn.settimeout(2)
                if conn.recv(64).startswith(b"SSH-"):
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TestHostError(f"no SSH banner from {addr}:22 within {BOOT_TIMEOUT:.0f} s")
        time.sleep(0.1)


def system_state(host: TestHost, timeout: float = BOOT_TIMEOUT) -> str:
    """`systemctl is-system-running --wait` on the host."""
    command = ssh_command(host, "systemctl", "is-system-running", "--wait")
    return _run(command, check=False, timeout=timeout).stdout.strip()


def _wait_for_boot(host: TestHost, deadline: float) -> str:
    _wait_for_banner(host.address, deadline)
    state = ""
    while time.monotonic() < deadline:
        state = system_state(host, timeout=max(deadline - time.monotonic(), 1))
        if state in ("running", "degraded"):
            return state
        time.sleep(0.2)
    raise TestHostError(f"{host.name}: systemd did not finish booting (state {state or '?'})")


def up(
    name: str,
    index: int | None = None,
    volumes: Sequence[str | tuple[str, str]] = (),
    log: Log = _stderr,
) -> TestHost:
    """Start test host `name` (or return it unchanged when it is already running)."""
    check_name(name)
    mounts = [parse_volume(v) if isinstance(v, str) else v for v in volumes]
    image = ensure_image(log=log)
    p = paths()
    with _locked(p):
        old = _load(p, _record_path(p, name))
        if old and _running(p, old.container) and _netns_exists(old.netns):
            if index is None or index == old.index:
                return old
            raise TestHostError(f"{name} is already up as index {old.index}; bring it down first")
        _teardown(p, name, old)
        used = {h.index for h in list_hosts()} | veth_indexes(_run(["ip", "-o", "link"]).stdout)
        if index is None:
            index = old.index if old and old.index not in used else pick_index(used)
        elif not 1 <= index <= MAX_INDEX or index in used:
            raise TestHostError(f"index {index} is taken or outside 1..{MAX_INDEX}")
        host = TestHost(
            name=name,
            index=index,
            address=address(index),
            container=container_name(name),
            netns=netns_name(name),
            ssh_key=p.ssh_key,
            known_hosts=p.known_hosts,
        )
        start = time.monotonic()
        log(f"starting {name} at {host.address}")
        try:
            for command in netns_commands(name, index):
                _run(command)
            _forget_host_key(p, host.address)
            pubkey = p.ssh_key.with_suffix(".pub")
            _run(run_command(name, image, pubkey, mounts), env=podman_env(p))
            _record_path(p, name).write_text(json.dumps(host.record(), indent=2) + "\n")
            state = _wait_for_boot(host, start + BOOT_TIMEOUT)
        except BaseException:
            _teardown(p, name, host)
            raise
        log(f"{name} is up ({state}) in {time.monotonic() - start:.1f} s")
        return host


def _teardown(p: Paths, name: str, host: TestHost | None) -> bool:
    """Remove the container, namespace, veth and record of `name`; True when anything was."""
    found = False
    container, ns = container_name(name), netns_name(name)
    exists = ["podman", "container", "exists", container]
    if _run(exists, env=podman_env(p), check=False).returncode == 0:
        _podman(p, "rm", "-f", "-t", "5", container, timeout=60)
        found = True
    if _netns_exists(ns):
        _run(["ip", "netns", "del", ns])
        found = True
    if host is not None:
        if Path("/sys/class/net", veth_name(host.index)).exists():
            _run(["ip", "link", "del", veth_name(host.index)], check=False)
        _forget_host_key(p, host.address)
    record = _record_path(p, name)
    if record.exists():
        record.unlink()
        found = True
    return found


def down(name: str, log: Log = _stderr) -> bool:
    """Stop and remove test host `name`; False when there was nothing to remove."""
    check_name(name)
    _require(build=False)
    p = paths()
    with _locked(p):
        start = time.monotonic()
        host = _load(p, _record_path(p, name))
        found = _teardown(p, name, host)
    if found:
        log(f"{name} is down in {time.monotonic() - start:.1f} s")
    return found
