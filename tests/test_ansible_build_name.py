"""Ansible names llama.cpp builds exactly as gpuprov does, so both engines share builds on a host.

Real: ansible-playbook running the role's own tasks/plan.yml (connection local, no host needed),
compared with provision.build.plan for the same variables.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from checks.facts.model import HostFacts
from provision import build, stack

ROOT = Path(__file__).resolve().parent.parent
PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - ansible.builtin.include_role: {name: llama_cpp, tasks_from: plan}
    - ansible.builtin.copy:
        content: "{{ {'name': llama_cpp_build_name, 'args': llama_cpp_full_args} | to_json }}"
        dest: "{{ out_dir }}/{{ inventory_hostname }}.json"
      delegate_to: localhost
"""


def variants(tarball: Path) -> dict[str, dict[str, Any]]:
    return {
        "cpu-tarball": {"llama_cpp_tarball": str(tarball), "llama_cpp_tarball_subdir": "v/l"},
        "git-default": {},
        "git-cuda": {
            "llama_cpp_ref": "b7000",
            "llama_cpp_cuda_architectures": "86;120a",
            "llama_cpp_cuda_compiler": "/usr/local/cuda-12.9/bin/nvcc",
            "llama_cpp_cmake_args": ["-DGGML_CUDA_FA_ALL_QUANTS=ON"],
        },
    }


def test_ansible_and_gpuprov_name_builds_alike(tmp_path: Path) -> None:
    tarball = tmp_path / "llama_cpp_python-0.3.36.tar.gz"
    tarball.write_bytes(b"not really a tarball, but bytes to hash")
    cases = variants(tarball)
    lines = ["[all]"]
    for name in cases:
        lines.append(f"{name} ansible_connection=local ansible_python_interpreter={sys.executable}")
    (tmp_path / "hosts.ini").write_text("\n".join(lines) + "\n")
    host_vars = tmp_path / "host_vars"
    host_vars.mkdir()
    for name, data in cases.items():
        (host_vars / f"{name}.json").write_text(json.dumps(data))
    (tmp_path / "play.yml").write_text(PLAY)
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible" / "ansible.cfg")}
    playbook = str(Path(sys.executable).parent / "ansible-playbook")
    argv = [playbook, "-i", str(tmp_path / "hosts.ini"), "-e", f"out_dir={out}"]
    done = subprocess.run(
        [*argv, str(tmp_path / "play.yml")],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT / "ansible",
    )
    assert done.returncode == 0, done.stdout[-3000:]
    names = set()
    for name, data in cases.items():
        s = stack.from_data(data)
        nvcc = s.cuda_compiler
        expected = build.plan(s, HostFacts(), nvcc)
        got = json.loads((out / f"{name}.json").read_text())
        assert got["args"] == list(expected.cmake_args), name
        assert got["name"] == expected.name, name
        names.add(got["name"])
    assert len(names) == len(cases)
