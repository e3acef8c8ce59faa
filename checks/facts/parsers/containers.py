"""Container engines and the NVIDIA Container Toolkit: docker, podman, nvidia-ctk, CDI, images."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from checks.facts.model import ContainerImage, Docker, Gpu, HostFacts, merge
from checks.facts.parsers import Format, sections
from checks.facts.probe import Probe

_DAEMON_ERROR = re.compile(
    r"^(?:ERROR: )?((?:Cannot connect to the Docker daemon|permission denied while trying to"
    r" connect to the Docker daemon|error during connect)[^\n]*)$",
    re.MULTILINE,
)
_PODMAN = re.compile(r"^podman version (\S+)\s*$", re.MULTILINE)
_CTK = re.compile(r"^NVIDIA Container Toolkit CLI version (\S+)", re.MULTILINE)
_CLI_VERSION = re.compile(r"^(?:cli-)?version: (\d+\.(?=\d)\S+)\s*$", re.MULTILINE)
_CLI_INFO = re.compile(r"^(NVRM version|CUDA version|Device Index|Model|Brand|GPU UUID|Bus Location"
                       r"|Architecture):\s*(.*)$", re.MULTILINE)  # fmt: skip
# `nvidia-container-cli -k -d /dev/tty info` logs each driver library it finds
# (NVIDIA/nvidia-docker#1060): "I1225 03:31:09.423932 1885 nvc_info.c:147] selecting
# /usr/lib64/libnvidia-tls.so.418.67". The file names carry the userspace driver's version, even
# when the paste is cut before "NVRM version:", and OptiX's libnvoptix, the first it selects
# (NVIDIA/nvidia-docker#1266, #1711, #1717), is the driver's too. A compat libcuda is not the
# driver's.
_CLI_SELECTING = re.compile(
    r"^[ \t]{0,8}I\d{4} \d\d:\d\d:\d\d\.\d{1,6} {1,4}\d{1,10} nvc_info\.c:\d{1,5}\] selecting "
    r"(/\S{0,400}?)/lib(?:nvidia-[\w-]{1,40}|cuda|nvcuvid|nvoptix|\w{1,20}_nvidia)"
    r"\.so\.(\d{3}\.\d{1,3}(?:\.\d{1,3})?)[ \t]*$",
    re.MULTILINE,
)
# Its GSP firmware lookup names the folder after the driver version NVML reported
# (lookup_firmwares: NV_FIRMWARE_PATH "/lib/firmware/nvidia/%s" of nvrm_version), found or not:
# "W0630 12:21:27.181579 124864 nvc_info.c:347] missing firmware path
# /lib/firmware/nvidia/460.91.03" (NVIDIA/nvidia-container-toolkit#251), ".../535.183.01/gsp*.bin"
# under a driver root (#671), "I0721 ... nvc_info.c:343] listing firmware path
# /usr/lib/firmware/nvidia/515.48.07/gsp.bin" (NVIDIA/k8s-device-plugin#324).
_CLI_FIRMWARE = re.compile(
    r"^[ \t]{0,8}[IW]\d{4} \d\d:\d\d:\d\d\.\d{1,6} {1,4}\d{1,10} nvc_info\.c:\d{1,5}\]"
    r" (?:missing|listing) firmware path /\S{0,400}?/firmware/nvidia/(\d{3}\.\d{1,3}(?:\.\d{1,3})?)"
    r"(?:/[\w*.-]{1,64})?[ \t]*$",
    re.MULTILINE,
)
_HOOK = re.compile(r"^runtime-hook: (\S.*)$", re.MULTILINE)
# `docker info | grep -i runtime` keeps only these lines of `docker info`, indented by one blank.
_RUNTIMES = re.compile(r"^[ \t]{0,4}Runtimes:((?:[ \t]{1,4}[\w.-]{1,100}){1,20})[ \t]*$", re.M)
_DEFAULT_RUNTIME = re.compile(r"^[ \t]{0,4}Default Runtime:[ \t]{1,4}([\w.-]{1,100})[ \t]*$", re.M)
# `nvidia-container-runtime --version`: "NVIDIA Container Runtime version 1.13.5".
_RUNTIME_VERSION = re.compile(r"^NVIDIA Container Runtime version (\d+\.\d+\.\d+\S*)", re.M)
_CDI_FILE = re.compile(r"^(/\S+\.(?:ya?ml|json))\s*$", re.MULTILINE)
_NULLS = ("", "(null)", "N/A")
# nvidia-ctk's CDI names for a whole GPU by index: "nvidia.com/gpu=0". Its other names for the
# same GPU ("=GPU-<uuid>"), its MIG devices ("=0:1", "=MIG-<uuid>") and "=all" add no GPU.
_CDI_GPU_INDEX = re.compile(r"nvidia\.com/gpu=(\d{1,3})")
# `systemctl show -p LoadState -p ActiveState nvidia-cdi-refresh.service`.
_UNIT_SHOW = re.compile(r"^(LoadState|ActiveState)=([a-z-]{0,20})[ \t]*$", re.MULTILINE)
# `systemctl status nvidia-cdi-refresh.service` pasted: its title line, then within a few lines
# "Active: failed (Result: exit-code) since ...".
_CDI_REFRESH_STATUS = re.compile(
    r"nvidia-cdi-refresh\.service - [^\n]{0,80}\n(?:[^\n]{0,300}\n){0,3}?[ \t]{0,12}"
    r"Active: ([a-z-]{1,20})\b"
)

DOCKER_COMMAND = "docker info --format '{{json .}}' 2>&1"

TOOLKIT_COMMAND = r"""PATH=$PATH:/usr/sbin:/sbin
echo '### gpuprov:podman'
command -v podman >/dev/null 2>&1 && podman --version 2>&1
echo '### gpuprov:nvidia-ctk'
command -v nvidia-ctk >/dev/null 2>&1 && nvidia-ctk --version 2>&1
echo '### gpuprov:nvidia-container-cli'
command -v nvidia-container-cli >/dev/null 2>&1 && nvidia-container-cli --version 2>&1
echo '### gpuprov:hook'
h=$(command -v nvidia-container-runtime-hook 2>/dev/null) || h=none
echo "runtime-hook: $h"
echo '### gpuprov:cdi'
for d in /etc/cdi /var/run/cdi; do
  for f in "$d"/*.yaml "$d"/*.yml "$d"/*.json; do [ -f "$f" ] && echo "$f"; done
done
echo '### gpuprov:cdi-refresh'
command -v systemctl >/dev/null 2>&1 &&
  systemctl show -p LoadState -p ActiveState nvidia-cdi-refresh.service 2>/dev/null
exit 0
"""

CONTAINER_CLI_INFO_COMMAND = "nvidia-container-cli info 2>&1"


def parse_docker_info_text(text: str) -> HostFacts:
    """`docker info` as text, including the client-only answer when the daemon is unreachable."""
    facts = HostFacts()
    docker = Docker()
    section = ""
    block = ""
    devices: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        heading = re.match(r"(Client|Server):", line)
        if heading is not None:
            section, block = heading.group(1), ""
            continue
        indent = len(line) - len(line.lstrip(" "))
        key, sep, value = stripped.partition(":")
        if indent <= 1 and sep:
            block = key if not value.strip() else ""
            _docker_field(docker, section, key, value.strip())
        elif indent >= 2 and block and stripped:
            _docker_block_item(docker, block, stripped, devices)
    if devices:
        docker.cdi_devices = devices
        facts.gpus = _cdi_gpus(devices)
    if docker.server_version is not None and docker.rootless is None and "Security Options" in text:
        docker.rootless = False
    error = _DAEMON_ERROR.search(text)
    if error is not None and docker.server_version is None:
        docker.server_error = error.group(1).rstrip()
    if docker != Docker():
        facts.containers.docker = docker
    return facts


def _docker_field(docker: Docker, section: str, key: str, value: str) -> None:
    if not value:
        return
    if key == "Version" and section == "Client":
        docker.client_version = value
    elif key == "Server Version":
        docker.server_version = value
    elif key == "Runtimes":
        docker.runtimes = value.split()
    elif key == "Default Runtime":
        docker.default_runtime = value
    elif key == "Cgroup Driver":
        docker.cgroup_driver = value
    elif key == "Cgroup Version":
        docker.cgroup_version = value


def _docker_block_item(docker: Docker, block: str, item: str, devices: list[str]) -> None:
    if block == "CDI spec directories":
        docker.cdi_spec_dirs = [*(docker.cdi_spec_dirs or []), item]
    elif block == "Discovered Devices":
        source, _, device = item.partition(":")
        if source.strip() == "cdi" and device.strip():
            devices.append(device.strip())
    elif block == "Security Options" and item == "rootless":
        docker.rootless = True


def parse_docker_info_json(text: str) -> HostFacts:
    """`docker info --format '{{json .}}'`; daemon errors may sit beside it (stderr is joined)."""
    facts = HostFacts()
    info = _json_object(text)
    if info is None:
        return facts
    docker = Docker()
    client = info.get("ClientInfo")
    if isinstance(client, dict):
        docker.client_version = _text(client.get("Version"))
    docker.server_version = _text(info.get("ServerVersion"))
    runtimes = info.get("Runtimes")
    if isinstance(runtimes, dict) and runtimes:
        docker.runtimes = sorted(str(name) for name in runtimes)
    docker.default_runtime = _text(info.get("DefaultRuntime"))
    docker.cdi_spec_dirs = _strings(info.get("CDISpecDirs"))
    found = info.get("DiscoveredDevices")
    if isinstance(found, list):
        ids = [d.get("ID") for d in found if isinstance(d, dict) and d.get("Source") == "cdi"]
        docker.cdi_devices = [str(i) for i in ids if i] or None
    options = _strings(info.get("SecurityOptions"))
    if options is not None:
        docker.rootless = "name=rootless" in options
    docker.cgroup_driver = _text(info.get("CgroupDriver"))
    docker.cgroup_version = _text(info.get("CgroupVersion"))
    errors = _strings(info.get("ServerErrors"))
    if errors:
        docker.server_error = errors[0]
    elif docker.server_version is None:
        error = _DAEMON_ERROR.search(text)
        docker.server_error = error.group(1).rstrip() if error is not None else None
    if docker != Docker():
        facts.containers.docker = docker
    return facts


def _cdi_gpus(devices: list[str]) -> list[Gpu]:
    """One GPU, by index only, per whole GPU the CDI spec names by index ("nvidia.com/gpu=0")."""
    indices = {int(m.group(1)) for d in devices if (m := _CDI_GPU_INDEX.fullmatch(d)) is not None}
    return [Gpu(index=index) for index in sorted(indices)]


def _json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in text that parses, ignoring lines around it."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    for _ in range(20):
        if start == -1:
            break
        try:
            value, _ = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            start = text.find("{", start + 1)
            continue
        return value if isinstance(value, dict) else None
    return None


def _text(value: Any) -> str | None:
    return str(value) if isinstance(value, (str, int)) and str(value) not in _NULLS else None


def _strings(value: Any) -> list[str] | None:
    if not isinstance(value, list):
        return None
    return [str(item) for item in value if isinstance(item, (str, int))]


def _first(pattern: re.Pattern[str], text: str) -> str | None:
    match = pattern.search(text)
    return match.group(1) if match else None


def parse_podman_version(text: str) -> HostFacts:
    """`podman --version`: "podman version 4.3.1"."""
    facts = HostFacts()
    facts.containers.podman_version = _first(_PODMAN, text)
    return facts


def parse_nvidia_ctk_version(text: str) -> HostFacts:
    """`nvidia-ctk --version`: "NVIDIA Container Toolkit CLI version 1.12.0"."""
    facts = HostFacts()
    facts.containers.toolkit_version = _first(_CTK, text)
    return facts


def parse_container_cli_version(text: str) -> HostFacts:
    """`nvidia-container-cli --version`: "cli-version: 1.17.8" (older: "version: 1.0.0")."""
    facts = HostFacts()
    facts.containers.container_cli_version = _first(_CLI_VERSION, text)
    return facts


def parse_container_cli_info(text: str) -> HostFacts:
    """`nvidia-container-cli info`: the driver (NVRM, CUDA) and one block per device."""
    facts = HostFacts()
    gpu: Gpu | None = None
    for key, found in _CLI_INFO.findall(text):
        raw = found.rstrip()
        value = raw if raw not in _NULLS else None
        if key == "NVRM version":
            facts.driver.version = facts.driver.version or value
        elif key == "CUDA version":
            facts.driver.cuda_version = facts.driver.cuda_version or value
        elif key == "Device Index":
            gpu = Gpu(index=int(raw) if re.fullmatch(r"[0-9]{1,4}", raw) else None)
            facts.gpus.append(gpu)
        elif gpu is not None:
            _cli_device_field(gpu, key, value)
    return facts


def _selected_driver(text: str) -> str | None:
    """The one driver version nvidia-container-cli's selected libraries and firmware path agree
    on, or None."""
    found = {version for folder, version in _CLI_SELECTING.findall(text) if "compat" not in folder}
    found.update(_CLI_FIRMWARE.findall(text))
    return found.pop() if len(found) == 1 else None


def parse_container_cli_debug(text: str) -> HostFacts:
    """`nvidia-container-cli -d` debug lines: the driver from its libraries' file names and its
    firmware path."""
    facts = HostFacts()
    facts.driver.version = _selected_driver(text)
    return facts


def _cli_device_field(gpu: Gpu, key: str, value: str | None) -> None:
    if key == "Model":
        gpu.name = value
    elif key == "Brand":
        gpu.brand = value
    elif key == "GPU UUID":
        gpu.uuid = value
    elif key == "Bus Location":
        gpu.pci_bus_id = value
    elif key == "Architecture" and value and re.fullmatch(r"\d+\.\d+", value):
        gpu.compute_capability = value


def parse_toolkit_probe(text: str) -> HostFacts:
    """The container-toolkit probe: podman, nvidia-ctk, nvidia-container-cli, hook, CDI specs."""
    facts = HostFacts()
    for section in sections.split(text):
        body, kind = section.text, section.name
        if kind == "podman":
            merge(facts, parse_podman_version(body))
        elif kind == "nvidia-ctk":
            merge(facts, parse_nvidia_ctk_version(body))
        elif kind == "nvidia-container-cli":
            merge(facts, parse_container_cli_version(body))
        elif kind == "hook":
            hook = _HOOK.search(body)
            if hook is not None:
                facts.containers.runtime_hook = hook.group(1).rstrip() != "none"
        elif kind == "cdi":
            facts.containers.cdi_specs = _CDI_FILE.findall(body)
        elif kind == "cdi-refresh":
            facts.containers.cdi_refresh = _unit_state(body)
    return facts


def _unit_state(text: str) -> str | None:
    """A unit's ActiveState from `systemctl show`, "absent" when systemd does not know it."""
    shown = dict(_UNIT_SHOW.findall(text))
    if shown.get("LoadState") == "not-found":
        return "absent"
    return shown.get("ActiveState") or None


def detect_cdi_refresh_status(text: str) -> bool:
    return _CDI_REFRESH_STATUS.search(text) is not None


def parse_cdi_refresh_status(text: str) -> HostFacts:
    """`systemctl status nvidia-cdi-refresh.service`: the unit's state."""
    facts = HostFacts()
    found = _CDI_REFRESH_STATUS.search(text)
    if found is not None:
        facts.containers.cdi_refresh = found.group(1)
    return facts


def parse_image_inspect(text: str) -> HostFacts:
    """`docker image inspect REF` (a JSON list): ref, CUDA_VERSION and NVIDIA_REQUIRE_CUDA."""
    facts = HostFacts()
    value: Any = None
    start = text.find("[")
    if start != -1:
        try:
            value = json.JSONDecoder().raw_decode(text, start)[0]
        except (ValueError, RecursionError):
            value = None
    items = value if isinstance(value, list) else [_json_object(text)]
    for item in items:
        if isinstance(item, dict):
            image = _image(item)
            if image is not None:
                facts.containers.images.append(image)
    return facts


def _image(item: dict[str, Any]) -> ContainerImage | None:
    config = item.get("Config")
    if not isinstance(config, dict) and "RepoTags" not in item:
        return None
    tags = _strings(item.get("RepoTags")) or []
    refs = tags + (_strings(item.get("RepoDigests")) or [])
    env = _strings(config.get("Env") if isinstance(config, dict) else None) or []
    image = image_from_env(refs[0] if refs else _text(item.get("Id")), tags, env)
    image.source = "image inspect"
    return image


# `docker inspect`'s Env list pasted on its own, a quoted "KEY=value" item a line
# (mark-ramsey-ri/vllm-dgx-spark#1): an image's environment, the ref and the rest of the JSON cut
# away. Its CUDA_VERSION is the toolkit the image was built with, and an NGC image's
# CUDA_DRIVER_VERSION the driver of that CUDA release: facts of the image, never of the host.
# Read as an image where MIN_ENV_ITEMS items or more in a row name its CUDA.
_ENV_ITEM = re.compile(
    r'^[ \t]{0,24}"([A-Za-z_][A-Za-z0-9_]{0,127}=[^"\n]{0,2000})",?[ \t]*$', re.MULTILINE
)
_ENV_CUDA = ("CUDA_VERSION=", "NVIDIA_REQUIRE_CUDA=")
MIN_ENV_ITEMS = 3


def _env_runs(text: str) -> list[list[str]]:
    """The items of each run of Env list lines in a row."""
    runs: list[list[str]] = []
    end = -2
    for item in _ENV_ITEM.finditer(text):
        if item.start() != end + 1:
            runs.append([])
        runs[-1].append(item.group(1))
        end = item.end()
    return runs


def parse_env_items(text: str) -> HostFacts:
    """The image whose Env list the text holds: its CUDA and what the toolkit reads."""
    facts = HostFacts()
    for env in _env_runs(text):
        if len(env) >= MIN_ENV_ITEMS and any(item.startswith(_ENV_CUDA) for item in env):
            image = image_from_env(None, [], env)
            image.source = "docker inspect Env"
            facts.containers.images.append(image)
            break
    return facts


def detect_env_items(text: str) -> bool:
    return not detect_image_inspect(text) and bool(parse_env_items(text).containers.images)


def image_from_env(ref: str | None, tags: list[str], env: list[str]) -> ContainerImage:
    """An image from its reference, tags and environment ("KEY=value" entries, as an image config
    lists them): what the NVIDIA Container Toolkit and vLLM's entrypoint read."""
    values: dict[str, str] = {}
    for entry in env:
        key, _, val = entry.partition("=")
        values[key] = val
    disable = values.get("NVIDIA_DISABLE_REQUIRE")
    return ContainerImage(
        ref=ref,
        cuda_version=values.get("CUDA_VERSION") or None,
        require_cuda=values.get("NVIDIA_REQUIRE_CUDA") or None,
        tags=tags or None,
        disable_require=_parse_bool(disable) if disable is not None else None,
        compat_setting=values.get("VLLM_ENABLE_CUDA_COMPATIBILITY"),
    )


def _parse_bool(value: str) -> bool | None:
    """Go's strconv.ParseBool, as the toolkit reads NVIDIA_DISABLE_REQUIRE; None if invalid (the
    toolkit then keeps the requirement)."""
    if value in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if value in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    return None


def image_probe(ref: str) -> Probe:
    """A probe that inspects one local image (nothing is pulled)."""
    command = f"docker image inspect {shlex.quote(ref)} 2>&1"
    return Probe(f"image:{ref}", command, parse_image_inspect, requires="docker", timeout=15.0)


def detect_docker_info_text(text: str) -> bool:
    return re.search(r"^Client:", text, re.MULTILINE) is not None and (
        "Server Version:" in text or re.search(r"^ Context:", text, re.MULTILINE) is not None
    )


def parse_docker_runtime_lines(text: str) -> HostFacts:
    """The runtime lines `docker info | grep -i runtime` leaves, and the NVIDIA runtime's version.

    The last `Runtimes:` and `Default Runtime:` lines count: a paste that repeats the command
    after changing the daemon ends with the daemon as it is now.
    """
    facts = HostFacts()
    docker = Docker()
    runtimes = _RUNTIMES.findall(text)
    docker.runtimes = runtimes[-1].split() if runtimes else None
    default = _DEFAULT_RUNTIME.findall(text)
    docker.default_runtime = default[-1] if default else None
    if docker != Docker():
        facts.containers.docker = docker
    facts.containers.runtime_version = _first(_RUNTIME_VERSION, text)
    return facts


def detect_docker_runtime_lines(text: str) -> bool:
    return (
        _RUNTIMES.search(text) is not None
        or _DEFAULT_RUNTIME.search(text) is not None
        or _RUNTIME_VERSION.search(text) is not None
    )


def detect_docker_info_json(text: str) -> bool:
    return '"ServerVersion"' in text and '"Runtimes"' in text


def detect_podman(text: str) -> bool:
    return _PODMAN.search(text) is not None


def detect_nvidia_ctk(text: str) -> bool:
    return _CTK.search(text) is not None


def detect_container_cli_info(text: str) -> bool:
    return re.search(r"^NVRM version:\s", text, re.MULTILINE) is not None and (
        "Device Index:" in text or "CUDA version:" in text
    )


def detect_container_cli_debug(text: str) -> bool:
    return _selected_driver(text) is not None


# `nvidia-ctk cdi generate` logs the driver version NVML reported before it looks the driver's
# libraries up (pkg/nvcdi/driver-nvml.go, getVersionLibs: "Using driver version %v"), as logrus
# prints it on a terminal ("INFO[0000] ...") or elsewhere ('time="..." level=info msg="..."').
_CDI_DRIVER = re.compile(
    r'^(?:INFO\[\d{1,10}\] |time="[^"\n]{0,64}" level=info msg=")'
    r"Using driver version (\d{3}\.\d{1,3}(?:\.\d{1,3})?)\b",
    re.MULTILINE,
)


def parse_cdi_generate(text: str) -> HostFacts:
    """The driver version `nvidia-ctk cdi generate` found."""
    facts = HostFacts()
    facts.driver.version = _first(_CDI_DRIVER, text)
    return facts


def detect_cdi_generate(text: str) -> bool:
    return _CDI_DRIVER.search(text) is not None


def detect_image_inspect(text: str) -> bool:
    return '"RepoTags"' in text and '"Config"' in text


FORMATS = [
    Format("docker-info", detect_docker_info_text, parse_docker_info_text),
    Format("docker-info-json", detect_docker_info_json, parse_docker_info_json),
    Format("docker-info-runtimes", detect_docker_runtime_lines, parse_docker_runtime_lines),
    Format("podman-version", detect_podman, parse_podman_version),
    Format("nvidia-ctk-version", detect_nvidia_ctk, parse_nvidia_ctk_version),
    Format("nvidia-container-cli-info", detect_container_cli_info, parse_container_cli_info),
    Format("nvidia-container-cli-debug", detect_container_cli_debug, parse_container_cli_debug),
    Format("docker-image-inspect", detect_image_inspect, parse_image_inspect),
    Format("docker-inspect-env-list", detect_env_items, parse_env_items),
    Format("systemctl-status-cdi-refresh", detect_cdi_refresh_status, parse_cdi_refresh_status),
    Format("nvidia-ctk-cdi-generate", detect_cdi_generate, parse_cdi_generate),
]

PROBES = [
    Probe("docker", DOCKER_COMMAND, parse_docker_info_json, requires="docker", timeout=20.0),
    Probe("container-toolkit", TOOLKIT_COMMAND, parse_toolkit_probe),
    Probe(
        "nvidia-container-cli-info",
        CONTAINER_CLI_INFO_COMMAND,
        parse_container_cli_info,
        requires="nvidia-container-cli",
        timeout=30.0,
    ),
]
