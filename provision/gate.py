"""The gate: the check run on every host before anything changes, and the stack checked too.

Remote hosts run the probes through pyinfra's connectors (one fact, one round trip); the same
rules then judge the facts and the planned build and services, as they would judge existing ones:
each rule's `detected_by` says which of these it judges.
"""

from __future__ import annotations

import copy
import dataclasses
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
from checks.services import modelconfig, vllm_images
from checks.services import vllm_service as services
from provision import blocking, build, servicefacts, vram
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
    host_findings: list[Finding] = field(default_factory=list)  # about the host as it is
    deployed: blocking.Deployed = field(default_factory=blocking.Deployed)

    def errors(self) -> list[tuple[Finding, bool, str]]:
        """Each error finding, whether it blocks this deployment, and why (or why not)."""
        return [
            (f, *blocking.judge(f, f in self.host_findings, self.facts, self.deployed))
            for f in self.findings
            if f.severity == "error"
        ]

    def blockers(self) -> list[Finding]:
        return [f for f, blocks, _ in self.errors() if blocks]

    @property
    def blocked(self) -> bool:
        """Problems, or error findings about what is deployed, stop changes to this host."""
        return bool(self.problems) or bool(self.blockers())


def facts_from_output(name: str, output: str) -> HostFacts:
    return remote.parse(all_probes(), output, probed_on("gpuprov", name, "(pyinfra)"))


def judge(name: str, facts: HostFacts, stack: Stack) -> HostGate:
    """Findings for a host's facts plus its stack; plans the build when it can."""
    gate = HostGate(name, facts, engine.evaluate(facts, route="host"))
    gate.host_findings = list(gate.findings)
    gate.findings += profile_findings(facts, stack)
    if stack.vllm.replicas:
        _containers(gate, stack)
    if not stack.builds_llama:
        gate.deployed = _deployed(stack, gate)
        gate.findings = engine.ordered(gate.findings)
        return gate
    try:
        archs = build.architectures(stack, facts)
    except build.BuildError as exc:
        gate.problems.append(str(exc))
        return gate
    if archs:
        good = [t for t in recommend.good_toolkits(facts) if (t.path or "").endswith("/nvcc")]
        release = recommend.build_release(facts)
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
    gate.deployed = _deployed(stack, gate)
    gate.findings += planned_build_findings(facts, gate.plan, gate.nvcc)
    gate.findings = engine.ordered(gate.findings)
    return gate


def _deployed(stack: Stack, gate: HostGate) -> blocking.Deployed:
    users = []
    if gate.plan is not None and gate.plan.cuda:
        users.append("the CUDA llama.cpp build")
    if stack.vllm.replicas:
        users.append("the vLLM replicas")
    return blocking.Deployed(tuple(users), gate.nvcc, bool(stack.vllm.replicas))


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
            cuda_toolkit_update=toolkit.update if toolkit else None,
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
    return service_findings(facts, planned_servers(stack), [])


def planned_servers(stack: Stack, found: ServiceFacts | None = None) -> list[LlamaServer]:
    """Each profile's llama-server as llama.cpp reads its arguments; with what was read on the
    host, also what the llama-server there refuses and which of its files are missing."""
    profiles = [dataclasses.asdict(p) for p in stack.profiles]
    if found is None:
        return servicefacts.servers(profiles)
    return servicefacts.servers(profiles, found.binary, found.files)


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
    """Image preflight, the flag lint of vLLM replicas, the llama-server profiles against the
    build that will run them and the model files they name, and the VRAM budget, from what was
    read on the host."""
    facts = gate.facts
    if stack.vllm.replicas and gate.image and found.inspect:
        image = vllm_images.image_from_inspect(found.inspect)
        if image is not None:
            gate.image_present = True
            gate.findings += vllm_images.preflight(facts, image)
    gate.findings += lint(facts, stack, gate.image, found)
    servers = planned_servers(stack, found)
    known = set(gate.findings)  # profile_findings judged these profiles without the host's reads
    gate.findings += [f for f in service_findings(facts, servers, []) if f not in known]
    claims: list[vram.VllmClaim | vram.LlamaClaim] = [
        vram.VllmClaim(r.unit, r.gpus, r.gpu_memory_utilization, vllm_group(r.swap_group))
        for r in stack.vllm.replicas
    ]
    if gate.plan is not None and gate.plan.cuda:
        for p, server in zip(stack.profiles, servers, strict=True):
            claim = vram.llama_claim(p.unit, server, *servicefacts.headers(found, server))
            claims.append(dataclasses.replace(claim, group=p.swap_group))
    if claims and facts.gpus:
        gate.budget = vram.budget(facts.gpus, claims)
        if not gate.budget.fits:
            gate.problems.append("the services do not fit in GPU memory (see the VRAM table)")
    gate.findings = engine.ordered(gate.findings)


def vllm_group(name: str) -> str:
    """A vLLM swap group's name in the VRAM budget: its members conflict with one another only,
    never with a llama.cpp profile of a group of the same name."""
    return f"{name} (vLLM)" if name else ""


def lint(facts: HostFacts, stack: Stack, image: str, found: ServiceFacts) -> list[Finding]:
    """The planned-services rules applied to the planned vLLM replicas."""
    if not stack.vllm.replicas:
        return []
    version = vllm_images.version_of_image(image, found.inspect) if image else None
    replicas = []
    for r in stack.vllm.replicas:
        text = found.configs.get(r.name)
        config = modelconfig.parse(text) if text else None
        if config is None and not r.local_model:
            config = modelconfig.guess_from_name(r.model)
        argv = vllm_cmd.serve_args(r)
        replicas.append(
            services.service(r.name, image, version, argv, config, list(r.gpus), dict(r.env))
        )
    return service_findings(facts, [], replicas)
