"""gpuprov's gate as an Ansible action: the check `gpuprov apply` runs before it changes a host.

On the target it runs the probe script pyinfra's gate runs (provision/gate.py `Probes`: plain sh,
python3 where present), through the task's connection and become. On the controller it reads
the output into host facts and judges them with gpuprov's matrix and the stack the play's
variables describe (llama_server_profiles, vllm_replicas, llama_cpp_*, ...; provision/stack.py),
exactly as `gpuprov apply` does. It fails the task when the gate blocks the host, naming each
rule with its message and fix, unless `skip` (or the variable `gpuprov_check_skip`) is true, as
`gpuprov apply --force` overrides the gate.

It returns the host facts (`facts`, gpuprov's JSON), the `findings`, and, as the host fact
`gpuprov_gate`, what the roles take from the plan: the llama.cpp build's name, its CUDA
architectures ("86;120a", "" for CPU-only) and nvcc, and the vLLM image reference.

Requires gpuprov on the controller (`pip install gpuprov`); without it the task fails saying so.

Testing only: when the controller's environment sets GPUPROV_CHECK_PROBE_OUTPUT to a file, the
probes are not run; that file is read instead, either a recorded output of the probe script or
a JSON object whose "facts" are gpuprov's host facts (tests/fixtures/stack/*.json).
"""

from __future__ import annotations

import json
import os
import shlex
from typing import Any

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

RECORDED = "GPUPROV_CHECK_PROBE_OUTPUT"
ARGS = frozenset(("skip",))


def _describe(finding: Any, blocks: bool | None, why: str) -> dict[str, Any]:
    described = {
        "rule": finding.rule,
        "severity": finding.severity,
        "title": finding.title,
        "subject": finding.subject,
        "message": finding.message,
        "fix": finding.fix,
        "citations": list(finding.citations),
    }
    if blocks is not None:
        described.update(blocks=blocks, why=why)
    return described


def _line(f: dict[str, Any]) -> str:
    return f"{f['rule']} {f['title']} ({f['subject']}): {f['message']} Fix: {f['fix']}"


class ActionModule(ActionBase):
    """Run gpuprov's probes on the target and judge them with gpuprov's gate."""

    TRANSFERS_FILES = False
    _VALID_ARGS = ARGS

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result: dict[str, Any] = super().run(tmp, task_vars)
        result["changed"] = False
        try:
            from checks.facts.gather import all_probes
            from checks.facts.model import HostFacts, from_dict, to_dict
            from checks.facts.remote import script
            from provision import gate, stack
        except ImportError as e:
            result.update(
                failed=True,
                msg=f"gpuprov_check needs gpuprov on the controller: pip install gpuprov ({e})",
            )
            return result
        skip = boolean(
            self._task.args.get("skip", task_vars.get("gpuprov_check_skip", False)), strict=False
        )
        known = stack.defaults()
        data = {k: self._templar.template(v) for k, v in task_vars.items() if k in known}
        try:
            planned = stack.from_data(data)
        except stack.StackError as e:
            result.update(failed=True, msg=f"gpuprov_check: {e}")
            return result
        name = str(task_vars.get("inventory_hostname", "host"))
        recorded = os.environ.get(RECORDED, "")
        if recorded:
            with open(recorded, encoding="utf-8") as f:
                output = f.read()
        else:
            command = f"sh -c {shlex.quote(script(all_probes()))}"
            output = str(self._low_level_execute_command(command, sudoable=True).get("stdout", ""))
        if output.lstrip().startswith("{"):
            facts = from_dict(HostFacts, json.loads(output)["facts"])
        else:
            # become over SSH runs it on a tty (for sudo's prompt), which ends lines with \r\n
            facts = gate.facts_from_output(name, output.replace("\r\n", "\n"))
        verdict = gate.judge(name, facts, planned)
        verdicts = {id(f): (blocks, why) for f, blocks, why in verdict.errors()}
        findings = [_describe(f, *verdicts.get(id(f), (None, ""))) for f in verdict.findings]
        plan = verdict.plan
        result["facts"] = to_dict(facts)
        result["findings"] = findings
        result["ansible_facts"] = {
            "gpuprov_gate": {
                "blocked": verdict.blocked,
                "skipped": skip,
                "problems": list(verdict.problems),
                "blockers": sorted({f.rule for f in verdict.blockers()}),
                "build_name": plan.name if plan else "",
                "cuda_architectures": ";".join(plan.archs) if plan else "",
                "nvcc": verdict.nvcc if plan and plan.cuda else "",
                "install_cuda": verdict.install_cuda,
                "vllm_image": verdict.image,
                "vllm_image_detail": verdict.image_detail,
                "toolkit": list(verdict.toolkit),
            }
        }
        if verdict.blocked and not skip:
            lines = [f"error {p}" for p in verdict.problems]
            lines += [_line(f) for f in findings if f.get("blocks")]
            result["failed"] = True
            result["msg"] = (
                f"{name}: gpuprov's gate blocks this host (set gpuprov_check_skip to override, "
                "as `gpuprov apply --force` does):\n" + "\n".join(lines)
            )
        return result
