"""The gate: the check run on every host before anything changes, and the stack checked too.

Remote hosts run the probes through pyinfra's connectors (one fact, one round trip); the same
rules then judge the facts and the planned build, as they would judge an existing one.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from pyinfra.api.facts import FactBase

from checks.facts import remote
from checks.facts.gather import all_probes
from checks.facts.model import HostFacts, LlamaCppBuild
from checks.matrix import engine, registry
from checks.matrix.engine import Finding
from checks.matrix.evaluators import host_driver_cuda
from checks.reporting import recommend
from checks.services import gguf_header, modelconfig, vllm_images
from checks.services import vllm_service as services
from provision import build, vram
from provision import vllm as vllm_cmd
from provision.servicefacts import ServiceFacts
from provision.stack import Stack

QUANTIZED = {"q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"}
BUILD_RULE_CHECKS = {
    "llamacpp_arch_coverage",
    "cmake_arch_without_suffix",
    "nvcc_known_bad",
    "blackwell_without_fp4",
}
# The rules that judge planned vLLM services (HostFacts.vllm_services).
VLLM_SERVICE_CHECKS = {
    "vllm_turboquant_hybrid",
    "vllm_mtp_moe",
    "vllm_moe_max_num_seqs",
    "vllm_graph_capture_memory",
    "vllm_enforce_eager",
}
# Fixed by the nvidia_container_toolkit role when it runs: planned, not blocking.
TOOLKIT_RULES = {"CTR-004", "CTR-005"}


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
    return remote.parse(all_probes(), output, f"gpuprov probes on {name} (pyinfra)")


def judge(name: str, facts: HostFacts, stack: Stack) -> HostGate:
    """Findings for a host's facts plus its stack; plans the build when it can."""
    gate = HostGate(name, facts, engine.evaluate(facts))
    gate.findings += stack_findings(stack)
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
    rules = tuple(r for r in registry.rules() if r.check in BUILD_RULE_CHECKS)
    return [f for f in engine.evaluate(planned, rules) if "planned build" in f.subject]


def stack_findings(stack: Stack) -> list[Finding]:
    """Server settings llama.cpp is known to refuse."""
    found = []
    for p in stack.profiles:
        if p.cache_type_v in QUANTIZED and p.flash_attn == "off":
            subject = f"profile {p.name}: cache_type_v={p.cache_type_v}, flash_attn=off"
            rule = registry.rule("LCPP-008")
            assert rule is not None
            found.append(engine.finding(rule, {"subject": subject}))
    return found


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
        planned = [f for f in gate.findings if f.rule in TOOLKIT_RULES]
        gate.findings = [f for f in gate.findings if f.rule not in TOOLKIT_RULES]
        gate.toolkit = [
            f"{f.rule} {f.title}: fixed by the nvidia_container_toolkit role" for f in planned
        ]
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
    """The vLLM rules applied to the planned replicas."""
    if not stack.vllm.replicas:
        return []
    version = vllm_images.version_of_ref(image) if image else None
    planned = copy.copy(facts)
    planned.vllm_services = []
    for r in stack.vllm.replicas:
        text = found.configs.get(r.name)
        config = modelconfig.parse(text) if text else None
        if config is None and not r.local_model:
            config = modelconfig.guess_from_name(r.model)
        argv = vllm_cmd.serve_args(r)
        planned.vllm_services.append(services.service(r.name, image, version, argv, config))
    rules = tuple(r for r in registry.rules() if r.check in VLLM_SERVICE_CHECKS)
    return engine.evaluate(planned, rules)
