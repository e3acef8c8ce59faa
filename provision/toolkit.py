"""The NVIDIA Container Toolkit on a host: NVIDIA's apt steps, the Docker and CDI decisions, and
the check, once it is set up, that the container rules CTR-004 and CTR-005 no longer fire.

The install steps follow NVIDIA's install guide (GUIDE): the signing key dearmored into KEYRING,
the repository's list file with signed-by added, apt-get update, the packages.
"""

from __future__ import annotations

import copy
import json
import re

from checks.facts import remote
from checks.facts.model import Containers, HostFacts, merge, probed_on
from checks.facts.parsers import containers
from checks.matrix import engine, registry
from provision.quoting import shell_quote

GUIDE = (
    "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html"
)
KEYRING = "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
SOURCES = "/etc/apt/sources.list.d/nvidia-container-toolkit.list"
PREREQUISITES = ("curl", "gnupg2")
PACKAGES = (
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container-tools",
    "libnvidia-container1",
)
SCRIPT = "/usr/local/lib/gpuprov/gpuprov-ctk-configure.sh"
RULES = registry.fixed_by("nvidia_container_toolkit")
_APT_VERSION = re.compile(r"^[0-9][A-Za-z0-9.+~:-]*$")
_INSTALL = "DEBIAN_FRONTEND=noninteractive apt-get install -y"
_DEARMOR = "gpg --batch --yes --dearmor -o"


class ToolkitError(ValueError):
    """A setting the toolkit cannot be set up with; the message names the setting."""


def prerequisites_command() -> str:
    """What the install steps need: curl and gnupg2."""
    return f"apt-get update && {_INSTALL} --no-install-recommends {' '.join(PREREQUISITES)}"


def key_command(repo: str) -> str:
    """NVIDIA's signing key, dearmored into KEYRING (gpg fails on an empty or failed download)."""
    return f"curl -fsSL {shell_quote(repo.rstrip('/') + '/gpgkey')} | {_DEARMOR} {KEYRING}"


def source_command(repo: str) -> str:
    """The repository's list file with signed-by added; removed again, failing, when no signed
    source line came out (a failed download), so apt never sees an unsigned source."""
    url = repo.rstrip("/") + "/stable/deb/nvidia-container-toolkit.list"
    signed = f"s#deb https://#deb [signed-by={KEYRING}] https://#g"
    check = f"^deb \\[signed-by={KEYRING}] "
    return (
        f"curl -fsSL {shell_quote(url)} | sed {shell_quote(signed)} > {SOURCES}"
        f" && grep -q {shell_quote(check)} {SOURCES}"
        f" || {{ rm -f {SOURCES}; echo 'no signed NVIDIA container toolkit source' >&2; exit 1; }}"
    )


def repository_commands(repo: str) -> list[str]:
    """NVIDIA's apt repository: prerequisites, the signing key, the list file."""
    return [prerequisites_command(), key_command(repo), source_command(repo)]


def package_commands(version: str = "") -> list[str]:
    """apt-get update, then nvidia-container-toolkit; with `version` (e.g. 1.18.0-1) NVIDIA's four
    packages pinned to it, as the install guide pins them."""
    if version and not _APT_VERSION.match(version):
        raise ToolkitError(f"nvidia_container_toolkit_version: not an apt version: {version!r}")
    packages = [f"{p}={version}" for p in PACKAGES] if version else [PACKAGES[0]]
    return ["apt-get update", f"{_INSTALL} {' '.join(packages)}"]


def install_commands(repo: str, version: str = "") -> list[str]:
    """Every install step, in order."""
    return repository_commands(repo) + package_commands(version)


def no_apt_message(host: str) -> str:
    """Why a host without apt gets no toolkit, and what to do."""
    return (
        f"{host}: nvidia-ctk is not installed and {host} has no apt-get; install the NVIDIA "
        f"Container Toolkit with the host's package manager as NVIDIA's install guide describes "
        f"({GUIDE}), then run again"
    )


def not_installed_message(host: str) -> str:
    """Why a host without nvidia-ctk, where installing is switched off, cannot go on."""
    return (
        f"{host}: nvidia-ctk is not installed and nvidia_container_toolkit_install is false; "
        f"install the NVIDIA Container Toolkit ({GUIDE}) or set nvidia_container_toolkit_install"
    )


def configure_command(config: str) -> str:
    """The shared configure script for Docker's daemon configuration `config`."""
    return f"{SCRIPT} --config {shell_quote(config)}"


def docker_has_nvidia(facts: HostFacts) -> bool | None:
    """Whether the running Docker daemon lists the nvidia runtime; None when it did not say."""
    docker = facts.containers.docker
    if docker is None or docker.runtimes is None:
        return None
    return "nvidia" in docker.runtimes


def daemon_config_has_nvidia(text: str | None) -> bool:
    """Whether Docker's daemon.json (its text; None: no file) registers the nvidia runtime."""
    try:
        config = json.loads(text or "{}")
    except ValueError:
        return False
    runtimes = config.get("runtimes") if isinstance(config, dict) else None
    return isinstance(runtimes, dict) and "nvidia" in runtimes


def cdi_action(spec_present: bool, recorded: str | None, driver: str | None) -> str:
    """What the CDI spec needs: "generate" (missing), "regenerate" (written for another driver,
    or for an unrecorded one), or "" (up to date, or the driver is unknown so nothing to compare).
    """
    if not spec_present:
        return "generate"
    if driver is None:
        return ""
    return "" if (recorded or "").strip() == driver else "regenerate"


def cdi_commands(spec: str, driver: str | None) -> list[str]:
    """Write the CDI spec and record the driver it was generated for in `spec`.driver."""
    folder = spec.rsplit("/", 1)[0] or "/"
    return [
        f"mkdir -p {shell_quote(folder)}",
        f"nvidia-ctk cdi generate --output={shell_quote(spec)}",
        f"printf '%s\\n' {shell_quote(driver or '')} > {shell_quote(spec + '.driver')}",
    ]


PROBES = containers.PROBES
PROBE_SCRIPT = remote.script(PROBES)
FILTERS = {
    "nvidia_container_toolkit_key_command": key_command,
    "nvidia_container_toolkit_source_command": source_command,
}


def fresh_facts(output: str, host: str) -> HostFacts:
    """The container probes' facts from PROBE_SCRIPT's output on `host`."""
    return remote.parse(PROBES, output, probed_on("container", host, "after the toolkit role"))


def merged(base: HostFacts, fresh: HostFacts) -> HostFacts:
    """`fresh` (the container probes) over `base` (the gate's facts), whose container facts it
    replaces; GPUs and the driver still come from `base` where the probes do not say."""
    old = copy.deepcopy(base)
    old.containers = Containers()
    return merge(copy.deepcopy(fresh), old)


def rules_for(mode: str) -> tuple[str, ...]:
    """The rules the check holds a host to: CTR-005 (Docker's nvidia runtime) in docker mode only,
    since cdi mode hands GPUs to containers by CDI device names instead."""
    return RULES if mode == "docker" else ("CTR-004",)


def problems(base: HostFacts, fresh: HostFacts, mode: str) -> list[str]:
    """What still stops containers from reaching the GPU: the rules of `mode` on the merged facts,
    and in docker mode a Docker daemon that does not answer."""
    wanted = rules_for(mode)
    rules = tuple(r for r in registry.rules() if r.id in wanted)
    found = [
        f"{f.rule} {f.title}: {f.message} Fix: {f.fix}"
        for f in engine.evaluate(merged(base, fresh), rules)
    ]
    docker = fresh.containers.docker
    if mode == "docker" and docker is not None and docker.server_error:
        found.append(f"Docker does not answer: {docker.server_error}")
    return found


def failure_message(host: str, found: list[str]) -> str:
    """The post-check's verdict on a host, with every problem `problems` found."""
    head = f"{host}: the NVIDIA Container Toolkit is set up but containers still cannot use the GPU"
    return "; ".join([head, *found])
