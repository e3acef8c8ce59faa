"""The evaluators rules name in `check`: pure functions from facts and a rule's params to matches.

Each yields one dict per thing that triggers the rule; its values fill the rule's message and fix,
and its "case", when set, picks one of the rule's variants for the wording.
An evaluator that lacks a fact it needs yields nothing: unknown never becomes a finding here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from packaging.version import Version

from checks import coverage, versions
from checks.facts.model import (
    CompatLibrary,
    HostFacts,
    VllmService,
    probed_hosts,
)
from checks.matrix import images, registry, toolkits
from checks.matrix.host import (
    GPU_PROBES,
    cuda_users,
    gpu_label,
    gpus_looked_for,
    gpus_with_cc,
    host_driver,
    host_driver_cuda,
    is_jetson,
    llamacpp_label,
    nvidia_module_loaded,
    requirement_met,
    toolkit_label,
)
from checks.services import llama_server_args

Match = dict[str, str]
Evaluator = Callable[[HostFacts, Mapping[str, Any]], Iterator[Match]]
EVALUATORS: dict[str, Evaluator] = {}
# The probes that list GPUs: NVML in-process, else nvidia-smi.


def evaluator(func: Evaluator) -> Evaluator:
    EVALUATORS[func.__name__] = func
    return func


@evaluator
def driver_below_cuda(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    driver = host_driver(facts)
    if driver is None:
        return
    text, version = driver
    for subject, cuda in cuda_users(facts):
        if toolkits.driver_too_old(cuda, version, params["mode"]):
            family = registry.family_minimum(cuda)
            yield {
                "subject": subject,
                "driver": text,
                "cuda": str(cuda.major),
                "release": f"{cuda.major}.{cuda.minor}",
                "minimum": str(family),
                "release_minimum": str(registry.release_minimum(cuda) or family),
            }


@evaluator
def nvml_mismatch(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    drv = facts.driver
    module = drv.kernel_module_version
    userspace = drv.version or drv.nvml_library_version
    if drv.nvml_error and "mismatch" in drv.nvml_error.lower():
        yield {
            "subject": "NVML",
            "module": module or "unknown version",
            "userspace": userspace or "unknown version",
            "case": "nvml",
            "nvml_error": drv.nvml_error,
        }
        return
    module_v, user_v = versions.driver(module), versions.driver(drv.version)
    if module_v is not None and user_v is not None and module_v != user_v:
        yield {
            "subject": "NVIDIA driver",
            "module": str(module),
            "userspace": str(drv.version),
        }


@evaluator
def driver_loaded_without_gpu(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    """The nvidia module is loaded (so it bound a GPU) yet the driver lists none; a version
    mismatch is DRV-003's."""
    if facts.gpus or not nvidia_module_loaded(facts) or next(nvml_mismatch(facts, params), None):
        return
    drv = facts.driver
    module = drv.kernel_module_version or "version not read"
    failures = [f"nvidia-smi: {drv.smi_error}"] if drv.smi_error else []
    failures += [f"NVML: {drv.nvml_error}"] if drv.nvml_error else []
    if failures:
        yield {"subject": "NVIDIA driver", "module": module, "detail": "; ".join(failures)}
    elif any(p.name in GPU_PROBES and p.status == "ok" for p in facts.probes):
        yield {"subject": "NVIDIA driver", "module": module, "case": "no_devices"}


@evaluator
def driver_below_gpu(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    driver = host_driver(facts)
    if driver is None:
        return
    for gpu, _ in gpus_with_cc(facts):
        info = registry.arch_info(gpu.compute_capability or "")
        if info is None:
            continue
        first = Version(info["first_cuda"])
        minimum = registry.cuda_minimum_driver(first)
        if minimum is not None and driver[1] < minimum:
            yield {
                "subject": gpu_label(gpu),
                "cc": gpu.compute_capability or "",
                "first_cuda": info["first_cuda"],
                "minimum": str(minimum),
                "branch": str(minimum.major),
                "driver": driver[0],
            }


@evaluator
def driver_above_legacy_branch(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    driver = host_driver(facts)
    limit = coverage.cc_tuple(params["below_cc"])
    if driver is None or limit is None or driver[1].major <= params["last_branch"]:
        return
    for gpu, cc in gpus_with_cc(facts):
        if cc < limit:
            yield {
                "subject": gpu_label(gpu),
                "architecture": gpu.architecture or "legacy",
                "cc": gpu.compute_capability or "",
                "last_branch": str(params["last_branch"]),
                "driver": driver[0],
            }


@evaluator
def secure_boot_unsigned(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    if facts.system.secure_boot is not True:
        return
    mods = facts.modules
    unsigned = mods.nvidia_version is not None and not mods.nvidia_signer
    not_loaded = mods.loaded is not None and "nvidia" not in mods.loaded
    if unsigned and (not_loaded or facts.driver.smi_error):
        yield {"subject": "nvidia module"}
    elif not_loaded and facts.driver.smi_error:
        yield {"subject": "nvidia module", "case": "unreachable"}


@evaluator
def module_loaded(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    if facts.modules.loaded and params["module"] in facts.modules.loaded:
        yield {"subject": params["module"]}


@evaluator
def open_modules_required(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    flavour = facts.driver.kernel_module_flavour
    license_ = facts.modules.nvidia_license
    if flavour == "proprietary":
        case = ""
    elif flavour is None and license_ == "NVIDIA":
        case = "license"
    else:
        return
    for gpu, cc in gpus_with_cc(facts):
        if cc[0] in params["majors"]:
            yield {"subject": gpu_label(gpu), "cc": gpu.compute_capability or "", "case": case}


# Evaluators whose match says an NVIDIA driver is installed but cannot list the GPUs. While one
# matches and no GPU is listed, what the host's GPUs need is unknown, never "no GPU": no_gpu stays
# quiet and the recommendations wait for the driver (checks/reporting/recommend.py). None of them
# reads its params.
DRIVER_FAULTS = ("nvml_mismatch", "secure_boot_unsigned", "driver_loaded_without_gpu")


def driver_broken(facts: HostFacts) -> bool:
    """Whether a driver-fault evaluator matches while no GPU is listed."""
    return not facts.gpus and any(
        next(EVALUATORS[name](facts, {}), None) is not None for name in DRIVER_FAULTS
    )


@evaluator
def no_gpu(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    if facts.gpus or driver_broken(facts) or not gpus_looked_for(facts):
        return
    reasons = [
        f"{probe.name}: {probe.detail or probe.status}"
        for probe in facts.probes
        if probe.name in GPU_PROBES and probe.status != "ok"
    ]
    if facts.driver.smi_error:
        reasons.append(f"nvidia-smi: {facts.driver.smi_error}")
    if reasons:
        yield {"subject": "host", "detail": "; ".join(reasons)}
    else:
        yield {"subject": "host", "case": "no_devices"}


def _require_cuda(text: str | None) -> Version | None:
    match = re.search(r"cuda\s*>=\s*([\d.]+)", text or "")
    return versions.cuda(match.group(1)) if match else None


@evaluator
def image_requires_cuda(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    driver = host_driver(facts)
    driver_cuda = host_driver_cuda(facts)
    if driver is None or driver_cuda is None or not facts.containers.images:
        return
    for image in facts.containers.images:
        enforced = images.requirement(image)
        required = _require_cuda(enforced)
        if enforced and requirement_met(enforced, facts) is True:
            continue  # a brand/driver alternative admits this host, as the toolkit reads it
        if required is not None and required > driver_cuda:
            minimum = registry.cuda_minimum_driver(required)
            yield {
                "subject": images.label(image),
                "require": f"cuda>={required}",
                "driver": driver[0],
                "driver_cuda": str(driver_cuda),
                "minimum": str(minimum) if minimum else f"a driver for CUDA {required}",
            }


def _active_compat(facts: HostFacts, with_images: bool = True) -> Iterator[tuple[str, Version]]:
    """Compat libcuda that will be used: on the host's library path, or inside images."""
    for lib in facts.compat:
        version = versions.driver(lib.driver_version)
        if lib.on_library_path and version is not None:
            yield _compat_label(lib), version
    for image in facts.containers.images if with_images else []:
        version = images.compat_driver(image)
        if version is not None:
            yield f"{images.label(image)} compat libraries", version


def _compat_label(lib: CompatLibrary) -> str:
    name = lib.path or lib.package
    return f"compat library {name}" if name else "a compat library"


@evaluator
def forward_compat_unsupported(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    driver = host_driver(facts)
    if driver is None:
        return
    gpus = [g for g in facts.gpus if g.brand_class in params["classes"]]
    if not gpus:
        return
    for label, compat in _active_compat(facts):
        if compat > driver[1]:
            driver_cuda = host_driver_cuda(facts)
            yield {
                "subject": label,
                "compat": label,
                "compat_driver": str(compat),
                "driver": driver[0],
                "driver_cuda": str(driver_cuda) if driver_cuda else "the driver's",
                "gpu": gpu_label(gpus[0]),
                "brand_class": gpus[0].brand_class or "",
            }


@evaluator
def compat_older_than_driver(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    """Compat libcuda on the host's library path older than the driver. An image's own compat
    libraries are not judged here: whether they load depends on the toolkit's mode and version,
    which the image does not tell; the one case known (vLLM's ld.so.conf.d under the nvidia
    runtime) is vllm_compat_conf_under_nvidia_runtime's."""
    driver = host_driver(facts)
    if driver is None:
        return
    for label, compat in _active_compat(facts, with_images=False):
        if compat < driver[1]:
            yield {
                "subject": label,
                "compat": label,
                "compat_driver": str(compat),
                "driver": driver[0],
            }


def _has_nvidia(facts: HostFacts) -> bool:
    return bool(facts.gpus) or facts.driver.version is not None


@evaluator
def container_toolkit_missing(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    ctr = facts.containers
    docker = ctr.docker
    if docker is None or not _has_nvidia(facts) or ctr.toolkit_version or ctr.runtime_hook:
        return
    if docker.cdi_devices or (docker.runtimes and "nvidia" in docker.runtimes):
        return
    known_absent = ctr.runtime_hook is False or docker.runtimes is not None
    if known_absent:
        version = docker.server_version or docker.client_version or ""
        yield {"subject": "docker", "docker": version}


@evaluator
def docker_runtime_not_configured(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    ctr = facts.containers
    docker = ctr.docker
    if docker is None or docker.runtimes is None or "nvidia" in docker.runtimes:
        return
    if ctr.toolkit_version or ctr.runtime_hook:
        yield {
            "subject": "docker",
            "toolkit": ctr.toolkit_version or "",
            "runtimes": ", ".join(docker.runtimes) or "none",
        }


# Where nvidia-cdi-refresh.service writes the spec (NVIDIA_CTK_CDI_OUTPUT_FILE_PATH's default).
_REFRESHED_SPECS = ("/var/run/cdi/nvidia.yaml", "/run/cdi/nvidia.yaml")


@evaluator
def cdi_refresh_failed(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    """The toolkit's CDI refresh unit failed, and its spec is missing (or was not captured)."""
    ctr = facts.containers
    if ctr.cdi_refresh != "failed":
        return
    if ctr.cdi_specs is not None and set(ctr.cdi_specs) & set(_REFRESHED_SPECS):
        return
    toolkit = versions.parse(ctr.toolkit_version)
    old = toolkit is not None and toolkit < Version(params["waits_from"])
    yield {
        "subject": "nvidia-cdi-refresh.service",
        "toolkit_note": f" (toolkit {ctr.toolkit_version})" if ctr.toolkit_version else "",
        "spec": (
            "is missing"
            if ctr.cdi_specs is not None
            else "was probably not written (the spec folders were not captured)"
        )
        + ("; this toolkit's unit does not wait for the driver" if old else ""),
    }


def _torch_targets(
    version: str, cuda: Version, archs: list[str] | None
) -> list[coverage.Target] | None:
    if archs:
        return coverage.from_names(archs)
    found = registry.torch_targets(version, cuda)
    return coverage.from_versions(*found) if found else None


def _torch_remedy(cc: tuple[int, int], driver_cuda: Version | None) -> Match:
    """The newest wheel for `cc` the driver runs, with its index; else the no_wheel case."""
    wheel = registry.torch_wheel_for([cc], driver_cuda)
    if wheel is None:
        return {"case": "no_wheel"}
    return {"wheel": f"torch{wheel['torch']}", "index_url": registry.torch_index_url(wheel)}


@evaluator
def torch_arch_coverage(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    """A torch wheel without kernels for a GPU. Not on a Jetson: its wheels are NVIDIA's Jetson or
    aarch64 builds that tables/torch_wheels.toml does not describe, nor its fixes name."""
    if is_jetson(facts):
        return
    for package in facts.python:
        cuda = versions.release(package.cuda_version) or versions.torch_cuda(package.version)
        if package.name != "torch" or package.version is None or cuda is None:
            continue
        targets = _torch_targets(package.version, cuda, package.cuda_archs)
        if not targets:
            continue
        for gpu, cc in gpus_with_cc(facts):
            if coverage.covers(targets, cc):
                continue
            newer = cc > max((t.major, t.minor) for t in targets)
            if newer != (params["direction"] == "newer"):
                continue
            yield {
                "subject": f"torch {package.version}",
                "torch": package.version,
                "archs": coverage.describe(targets),
                "gpu": gpu_label(gpu),
                "cc": gpu.compute_capability or "",
                "sm": f"{cc[0]}{cc[1]}",
                **_torch_remedy(cc, host_driver_cuda(facts)),
            }


def _cmake_for(cc: str) -> str:
    info = registry.arch_info(cc)
    return info["cmake"] if info else cc.replace(".", "")


@evaluator
def llamacpp_arch_coverage(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    for build in facts.llamacpp:
        targets = coverage.from_system_info(build.cuda_archs) or coverage.from_cmake(
            build.cmake_cuda_architectures
        )
        if not targets or build.cuda is False:
            continue
        for gpu, cc in gpus_with_cc(facts):
            if not coverage.covers(targets, cc):
                yield {
                    "subject": llamacpp_label(build),
                    "archs": coverage.describe(targets),
                    "gpu": gpu_label(gpu),
                    "cc": gpu.compute_capability or "",
                    "cmake": _cmake_for(gpu.compute_capability or ""),
                }


@evaluator
def nvcc_known_bad(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    wanted = params["compute_capabilities"]
    gpus = [g for g in facts.gpus if g.compute_capability in wanted]
    if not gpus:
        return
    # (what, the best version known, whether that version is the toolkit update itself)
    subjects: list[tuple[str, str | None, bool]] = [
        (toolkit_label(t), *toolkits.toolkit_version(t)) for t in facts.toolkits
    ]
    subjects += [
        (
            llamacpp_label(b),
            b.cuda_toolkit_update or b.cuda_compiler_version,
            bool(b.cuda_toolkit_update),
        )
        for b in facts.llamacpp
    ]
    for subject, nvcc, is_update in subjects:
        if not toolkits.miscompiles(nvcc, is_update, params):
            continue
        yield {
            "subject": subject,
            "nvcc": str(nvcc),
            "gpu": gpu_label(gpus[0]),
            "cc": gpus[0].compute_capability or "",
            "case": "update_unknown" if params.get("good_updates") and not is_update else "",
            "good_updates": ", ".join(params.get("good_updates", [])),
        }


@evaluator
def cmake_arch_without_suffix(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    for build in facts.llamacpp:
        value = build.cmake_cuda_architectures
        if not value:
            continue
        entries = [e for e in re.split(r"[;,\s]+", value) if e]
        plain = [e for e in entries if e.split("-")[0] in params["archs"]]
        if plain:
            suggested = ";".join(e.split("-")[0] + "a" if e in plain else e for e in entries)
            yield {
                "subject": llamacpp_label(build),
                "cmake": value,
                "plain": ", ".join(plain),
                "suggested": f"-DCMAKE_CUDA_ARCHITECTURES={suggested}",
            }


@evaluator
def blackwell_without_fp4(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    major = int(params["major"])
    blackwell = [g for g, cc in gpus_with_cc(facts) if cc[0] == major]
    if not blackwell:
        return
    for build in facts.llamacpp:
        archs = build.cuda_archs or []
        if any(a.startswith(str(major)) for a in archs) and build.blackwell_native_fp4 is False:
            yield {
                "subject": llamacpp_label(build),
                "archs": ", ".join(archs),
                "gpu": gpu_label(blackwell[0]),
            }


@evaluator
def compression_old_driver(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    driver = host_driver(facts)
    if driver is None:
        return
    candidates: list[tuple[str, str | None, str | None]] = [
        (llamacpp_label(b), b.cuda_compiler_version, b.compression_mode) for b in facts.llamacpp
    ]
    candidates += [(toolkit_label(t), toolkits.toolkit_version(t)[0], None) for t in facts.toolkits]
    for subject, cuda_text, mode in candidates:
        cuda = versions.release(cuda_text)
        if cuda is None or not toolkits.compression_unloadable(cuda, mode, driver[1], params):
            continue
        yield {
            "subject": subject,
            "cuda": str(cuda),
            "mode": mode or params["default_mode"],
            "driver": driver[0],
            "min_driver": params["min_driver"],
        }


@evaluator
def nvcc_rejects_host_gcc(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    """Each installed nvcc whose CUDA release accepts only an older GCC major than the host's gcc
    (tables/host_compilers.toml); a release the table does not list is unknown and yields none."""
    gcc = facts.system.gcc_version
    for toolkit in facts.toolkits:
        nvcc = toolkits.toolkit_version(toolkit)[0]
        limit = toolkits.rejected_gcc(nvcc, gcc)
        if limit is not None:
            yield {
                "subject": toolkit_label(toolkit),
                "release": str(versions.release(nvcc)),
                "gcc": str(gcc),
                "gcc_max": str(limit),
            }


def replica_label(service: VllmService) -> str:
    if service.name:
        return f"replica {service.name}"
    return f"vLLM service {service.model}" if service.model else "vLLM service"


def _model_trait(service: VllmService, trait: str) -> str:
    """The model and its trait, hedged when the trait was guessed from the model's name."""
    wording = registry.table("wording")["model_trait"]
    template = wording["guessed" if service.model_guessed else "read"]
    return str(template.format(model=service.model or "the model", trait=trait))


def _probably(service: VllmService, sure: bool = True) -> str:
    """The verb "will", hedged when the prediction rests on a guess."""
    wording = registry.table("wording")["will"]
    return str(wording["sure" if sure and not service.model_guessed else "unsure"])


def _turboquant_case(version: Version | None, fixed: Version, broken: Version) -> str | None:
    """Which way TurboQuant fails on a hybrid model in vLLM `version`; None when it works."""
    if version is None:
        return "no_release"
    if version < fixed:
        return "before_fix"
    return "broken_again" if version >= broken else None


@evaluator
def vllm_turboquant_hybrid(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    fixed, broken = Version(params["fixed"]), Version(params["broken_again"])
    prefixes = tuple(params["dtype_prefixes"])
    for service in facts.vllm_services:
        dtype = service.kv_cache_dtype or ""
        if not dtype.lower().startswith(prefixes) or service.hybrid is not True:
            continue
        version = versions.parse(service.version)
        case = _turboquant_case(version, fixed, broken)
        if case is None:
            continue
        yield {
            "subject": replica_label(service),
            "will": _probably(service, version is not None),
            "dtype": dtype,
            "model": _model_trait(service, "hybrid"),
            "case": case,
            "version": str(version or ""),
            "fixed": str(fixed),
            "broken_again": str(broken),
        }


def _is_mtp(method: str | None) -> bool:
    return bool(method) and (method == "mtp" or str(method).endswith("_mtp"))


@evaluator
def vllm_mtp_moe(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    for service in facts.vllm_services:
        if service.moe is True and _is_mtp(service.speculative_method):
            yield {
                "subject": replica_label(service),
                "will": _probably(service),
                "method": service.speculative_method or "",
                "model": _model_trait(service, "MoE"),
            }


@evaluator
def vllm_moe_max_num_seqs(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    ceiling = int(params["ceiling"])
    for service in facts.vllm_services:
        seqs = service.max_num_seqs
        if service.moe is not True or (seqs is not None and seqs <= ceiling):
            continue
        yield {
            "subject": replica_label(service),
            "max_num_seqs": "" if seqs is None else str(seqs),
            "case": "unset" if seqs is None else "",
            "model": _model_trait(service, "MoE"),
            "ceiling": str(ceiling),
        }


@evaluator
def vllm_graph_capture_memory(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    threshold = float(params["threshold"])
    for service in facts.vllm_services:
        share = service.gpu_memory_utilization
        graphs_off = (service.cudagraph_mode or "").upper() == "NONE"
        if share is None or share < threshold or service.enforce_eager is not False or graphs_off:
            continue
        yield {
            "subject": replica_label(service),
            "utilization": f"{share:g}",
            "threshold": f"{threshold:g}",
        }


@evaluator
def vllm_enforce_eager(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    for service in facts.vllm_services:
        if service.enforce_eager is True:
            yield {"subject": replica_label(service), "model": service.model or "the model"}


@evaluator
def quantized_v_cache_without_flash_attn(
    facts: HostFacts, params: Mapping[str, Any]
) -> Iterator[Match]:
    unquantized = set(params["unquantized"])
    for server in facts.llama_servers:
        cache = server.cache_type_v
        if cache and cache not in unquantized and server.flash_attn == "off":
            profile = server.name or "(unnamed)"
            yield {
                "subject": f"profile {profile}: cache_type_v={cache}, flash_attn=off",
                "profile": profile,
                "cache_type_v": cache,
            }


@evaluator
def llama_server_refused(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    """Each argument of a planned llama-server that its build refuses, and mlock where the build
    cannot lock the model; only for servers whose --help came from the planned build itself
    (params.planned true) or from another build (false)."""
    for server in facts.llama_servers:
        if server.build_planned is not params["planned"]:
            continue
        profile = server.name or "(unnamed)"
        found = {"profile": profile, "build": server.build or "of unknown version"}
        for flag in server.rejected or ():
            yield {"subject": f"profile {profile}: {flag}", "flag": flag, **found}
        if server.mlock and server.mlock_supported is False:
            yield {
                "subject": f"profile {profile}: mlock",
                "flag": "mlock",
                "case": "mlock",
                **found,
            }


@evaluator
def llama_server_file_missing(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    """Each model, mmproj or draft model file of a planned llama-server the host cannot read."""
    host = next(iter(sorted(probed_hosts(facts.sources))), "the host")
    for server in facts.llama_servers:
        profile = server.name or "(unnamed)"
        for field, what in llama_server_args.FILES:
            path = getattr(server, field)
            if path and path in (server.missing_files or ()):
                yield {
                    "subject": f"profile {profile}: {what} {path}",
                    "profile": profile,
                    "what": what,
                    "path": path,
                    "host": host,
                }


@evaluator
def vllm_compat_conf_under_nvidia_runtime(
    facts: HostFacts, params: Mapping[str, Any]
) -> Iterator[Match]:
    """Docker runs every container with the nvidia runtime, and a vLLM image whose release lists
    its compat directory in /etc/ld.so.conf.d carries a compat libcuda older than the host driver.
    An image that sets VLLM_ENABLE_CUDA_COMPATIBILITY (the releases after the fix) is left out."""
    docker = facts.containers.docker
    driver = host_driver(facts)
    if docker is None or docker.default_runtime != "nvidia" or driver is None:
        return
    for image in facts.containers.images:
        if image.compat_setting is not None:
            continue
        release, mode = images.vllm_compat_mode(image)
        compat = (
            images.compat_driver_of_cuda(image.cuda_version) if mode == params["mode"] else None
        )
        if release and compat is not None and compat < driver[1]:
            yield {
                "subject": images.label(image),
                "image": image.ref or "a vLLM image",
                "release": release,
                "cuda": str(image.cuda_version),
                "compat_driver": str(compat),
                "driver": driver[0],
            }


@evaluator
def vllm_tp_pcie_p2p(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[Match]:
    """A replica with tensor parallelism over consumer or workstation (PCIe) GPUs whose
    environment leaves NCCL's peer-to-peer transport on."""
    pcie = {"consumer", "workstation"}
    for service in facts.vllm_services:
        tp = service.tensor_parallel_size or 1
        if tp < 2 or "NCCL_P2P_DISABLE" in (service.env or {}):
            continue
        wanted = set(service.gpus) if service.gpus is not None else None
        used = [g for g in facts.gpus if wanted is None or g.index in wanted]
        if len(used) < 2 or not all(g.brand_class in pcie for g in used):
            continue
        yield {
            "subject": replica_label(service),
            "count": str(len(used)),
            "gpus": ", ".join(f"{g.index} {g.name or 'unknown'}" for g in used),
            "tp": str(tp),
        }
