"""Which error findings stop `apply` on a host: only those about what the inventory deploys there.

A finding about the planned build, services or image always touches the deployment. A finding
about the host itself touches it when the deployment depends on that part: the driver and kernel
module when something planned uses the GPU, the container runtime when vLLM replicas are planned,
an installed nvcc when the llama.cpp build compiles with it. Findings about other software on the
host (a PyTorch in some venv, another llama.cpp build, another nvcc) are shown, never blocking.
"""

from __future__ import annotations

from dataclasses import dataclass

from checks.facts.model import HostFacts
from checks.matrix.engine import Finding
from checks.matrix.host import cuda_users, toolkit_label

# Rule areas about the driver and kernel: everything that uses the GPU depends on them.
FOUNDATION_AREAS = ("driver", "host")


@dataclass(frozen=True)
class Deployed:
    """What the inventory deploys on one host, as blocking sees it."""

    gpu_users: tuple[str, ...] = ()  # e.g. "the CUDA llama.cpp build", "the vLLM replicas"
    nvcc: str = ""  # path of the nvcc the llama.cpp build compiles with
    containers: bool = False  # vLLM replicas run in containers

    def names(self) -> str:
        return " and ".join(self.gpu_users)


def judge(
    finding: Finding, on_host: bool, facts: HostFacts, deployed: Deployed
) -> tuple[bool, str]:
    """Whether an error finding blocks this deployment, and why (or why not)."""
    if not on_host:
        return True, f"it is about {finding.subject}, which this inventory deploys"
    nvcc = next((t for t in facts.toolkits if deployed.nvcc and t.path == deployed.nvcc), None)
    if nvcc is not None and finding.subject == toolkit_label(nvcc):
        return True, f"the llama.cpp build compiles with {finding.subject}"
    if finding.subject in {label for label, _ in cuda_users(facts)}:
        return False, f"nothing this inventory deploys here uses {finding.subject}"
    if finding.area == "container":
        if deployed.containers:
            return True, "the vLLM replicas run in containers"
        return False, "this inventory runs no containers here"
    if finding.area in FOUNDATION_AREAS:
        if deployed.gpu_users:
            verb = "needs" if len(deployed.gpu_users) == 1 else "need"
            return True, f"{deployed.names()} {verb} a working NVIDIA driver and GPU"
        return False, "nothing this inventory deploys here uses the GPU"
    return False, f"{finding.subject} is not part of what this inventory deploys here"
