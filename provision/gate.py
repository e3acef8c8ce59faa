"""The gate: the check run on every host before anything changes, and the stack checked too.

Remote hosts run the probes through pyinfra's connectors (one fact, one round trip); the same
rules then judge the facts and the planned build and services, as they would judge existing ones:
each rule's `detected_by` says which of these it judges.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from pyinfra.api.facts import FactBase

from checks.facts import remote
from checks.facts.gather import all_probes
from checks.facts.model import HostFacts, LlamaCppBuild, LlamaServer, VllmService, probed_on
from checks.matrix import engine, registry
from checks.matrix.engine import Finding
from checks.matrix.host import host_driver_cuda
from checks.reporting import recommend
from checks.services import gguf_header, modelconfig, vllm_images
from checks.services import vllm_service as services
from provision import build, vram
from provision import vllm as vllm_cmd
from provision.servicefacts import ServiceFacts
from provision.stack import Stack

# The role that sets up the NVIDIA Container Toolkit: the rules it fixes are planned, not blocking.
TOOLKIT_ROLE = "nvidia_container_toolkit"


class Probes(FactBase[str]):
    """Every gpuprov probe's output, framed for checks.facts.remote.parse."""

    def command(self) -> str:
        return remote.script(all_probes())

    def process(self, output: Any) -> str:
        return "\n".join(output) + "\n"


@dataclass
class HostGate:
    """What the gate found on one host, and the build it plans there."""

    host: str
    facts: HostFacts
    findings: list[Finding] = field(default_factory=list)
    plan: build.Build | None = None
    nvcc: str = ""
    install_cuda: str = ""
    problems: list[str] = field(default_factory=list)
    image: str = ""
    image_detail: str = ""
    image_present: bool = False
    toolkit: list[str] = field(default_factory=list)
    budget: vram.Budget | None = None

    @property
    def blocked(self) -> bool:
        """Error findings, or a stack that cannot be planned, stop changes to this host."""
        return bool(self.problems) or any(f.severity == "error" for f in self.findings)


def facts_from_output(name: str, output: str) -> HostFacts:
    return remote.parse(all_probes(), output, probed_on("gpuprov", name, "(pyinfra)"))


def judge(name: str, facts: HostFacts, stack: Stack) -> HostGate:
    """Findings for a host's facts plus its stack; plans the build when it can."""
    gate = HostGate(name, facts, engine.evaluate(facts, route="host"))
    gate.findings += profile_findings(facts, stack)
    if stack.vllm.replicas:
        _containers(gate, stack)
    if not stack.builds_llama:
        gate.findings = engine.ordered(gate.findings)
        return gate
    try:
        archs = build.architectures(stack, facts)
    except build.BuildError as exc:
        gate.problems.append(str(exc))
        return gate
    if archs:
        good = [t for t in recommend.good_toolkits(facts) if (t.path or "").endswith("/nvcc")]
        release = recommend.nvcc(facts).value.removeprefix("CUDA ")
        if stack.cuda_compiler:
            gate.nvcc = stack.cuda_compiler
        elif good:
            gate.nvcc = good[0].path or ""
        elif m := re.match(r"(\d+\.\d+)(\.\d+)?$", release):
            gate.install_cuda = m.group(1)
            gate.nvcc = f"/usr/local/cuda-{m.group(1)}/bin/nvcc"
        else:
            gate.problems.append(f"no CUDA toolkit to build with: {release}")
    gate.plan = build.plan(stack, facts, gate.nvcc)
    gate.findings += planned_build_findings(facts, gate.plan, gate.nvcc)
    gate.findings = engine.ordered(gate.findings)
    return gate


def planned_build_findings(facts: HostFacts, plan: build.Build, nvcc: str) -> list[Finding]:
    """The llama.cpp rules applied to the build the stack would make."""
    planned = copy.deepcopy(facts)
    toolkit = next((t for t in facts.toolkits if t.path == nvcc), None)
    planned.llamacpp = [
        LlamaCppBuild(
            path="planned build",
            cuda=plan.cuda,
            cmake_cuda_architectures=";".join(plan.archs) if plan.cuda else None,
            cuda_compiler_version=toolkit.version if toolkit else None,
        )
    ]
    planned.toolkits = []
    found = engine.evaluate(planned, route="planned-build")
    return [f for f in found if "planned build" in f.subject]


def service_findings(
    facts: HostFacts, llama: list[LlamaServer], vllm: list[VllmService]
) -> list[Finding]:
    """The planned-services rules applied to planned llama-server profiles and vLLM replicas."""
    planned = copy.copy(facts)
    planned.llama_servers = llama
    planned.vllm_services = vllm
    return engine.evaluate(planned, route="planned-services")


def profile_findings(facts: HostFacts, stack: Stack) -> list[Finding]:
    """The planned-services rules applied to the stack's llama-server profiles."""
    servers = [
        LlamaServer(
            name=p.name,
            flash_attn=p.flash_attn,
            cache_type_k=p.cache_type_k,
            cache_type_v=p.cache_type_v,
        )
        for p in stack.profiles
    ]
    return service_findings(facts, servers, [])


def _containers(gate: HostGate, stack: Stack) -> None:
    """The image the replicas run, and what the container runtime still needs."""
    facts = gate.facts
    if not facts.gpus:
        gate.problems.append("vLLM replicas need an NVIDIA GPU; the check found none")
    docker = facts.containers.docker
    if stack.vllm.engine.endswith("/docker") and docker is None:
        gate.problems.append(
            f"{stack.vllm.engine} is not installed: install Docker Engine first "
            "(https://docs.docker.com/engine/install/)"
        )
    if stack.toolkit.install:
        fixed = registry.fixed_by(TOOLKIT_ROLE)
        planned = [f for f in gate.findings if f.rule in fixed]
        gate.findings = [f for f in gate.findings if f.rule not in fixed]
        gate.toolkit = [f"{f.rule} {f.title}: fixed by the {TOOLKIT_ROLE} role" for f in planned]
    try:
        choice = vllm_images.select(
            stack.vllm.version,
            host_driver_cuda(facts),
            repository=stack.vllm.repository,
            pinned=stack.vllm.image,
        )
    except vllm_images.ImageError as exc:
        gate.problems.append(f"vLLM image: {exc}")
        return
    gate.image = choice.ref
    gate.image_detail = choice.reason


def judge_services(gate: HostGate, stack: Stack, found: ServiceFacts) -> None:
    """Image preflight, vLLM flag lint and the VRAM budget, from what was read on the host."""
    facts = gate.facts
    if stack.vllm.replicas and gate.image and found.inspect:
        image = vllm_images.image_from_inspect(found.inspect)
        if image is not None:
            gate.image_present = True
            gate.findings += vllm_images.preflight(facts, image)
    gate.findings += lint(facts, stack, gate.image, found)
    claims: list[vram.VllmClaim | vram.LlamaClaim] = [
        vram.VllmClaim(r.unit, r.gpus, r.gpu_memory_utilization) for r in stack.vllm.replicas
    ]
    if gate.plan is not None and gate.plan.cuda:
        for p in stack.profiles:
            text = found.gguf.get(p.model)
            claims.append(
                vram.LlamaClaim(
                    service=p.unit,
                    gpus=(),
                    model=gguf_header.parse_remote(text) if text else None,
                    ctx_size=p.ctx_size,
                    parallel=p.parallel,
                    cache_type_k=p.cache_type_k,
                    cache_type_v=p.cache_type_v,
                    gpu_layers=p.gpu_layers,
                )
            )
    if claims and facts.gpus:
        gate.budget = vram.budget(facts.gpus, claims)
        if not gate.budget.fits:
            gate.problems.append("the services do not fit in GPU memory (see the VRAM table)")
    gate.findings = engine.ordered(gate.findings)


def lint(facts: HostFacts, stack: Stack, image: str, found: ServiceFacts) -> list[Finding]:
    """The planned-services rules applied to the planned vLLM replicas."""
    if not stack.vllm.replicas:
        return []
    version = vllm_images.version_of_ref(image) if image else None
    replicas = []
    for r in stack.vllm.replicas:
        text = found.configs.get(r.name)
        config = modelconfig.parse(text) if text else None
        if config is None and not r.local_model:
            config = modelconfig.guess_from_name(r.model)
        argv = vllm_cmd.serve_args(r)
        replicas.append(services.service(r.name, image, version, argv, config))
    return service_findings(facts, [], replicas)
