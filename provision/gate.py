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

from checks import engine, matrix, recommend, remote
from checks.engine import Finding
from checks.facts import HostFacts, LlamaCppBuild
from checks.gather import all_probes
from provision import build
from provision.stack import Stack

QUANTIZED = {"q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"}
BUILD_RULE_CHECKS = {
    "llamacpp_arch_coverage",
    "cmake_arch_without_suffix",
    "nvcc_known_bad",
    "blackwell_without_fp4",
}


class Probes(FactBase[str]):
    """Every gpuprov probe's output, framed for checks.remote.parse."""

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
    rules = tuple(r for r in matrix.rules() if r.check in BUILD_RULE_CHECKS)
    return [f for f in engine.evaluate(planned, rules) if "planned build" in f.subject]


def stack_findings(stack: Stack) -> list[Finding]:
    """Server settings llama.cpp is known to refuse."""
    found = []
    for p in stack.profiles:
        if p.cache_type_v in QUANTIZED and p.flash_attn == "off":
            subject = f"profile {p.name}: cache_type_v={p.cache_type_v}, flash_attn=off"
            rule = matrix.rule("LCPP-008")
            assert rule is not None
            found.append(engine.finding(rule, {"subject": subject}))
    return found
