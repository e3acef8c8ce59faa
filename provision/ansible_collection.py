"""The gpuprov.inference Ansible collection, put together from the roles gpuprov ships.

    python -m provision.ansible_collection [DEST]    (DEST defaults to build/collection)
    python -m provision.ansible_collection --readmes (rewrites roles/*/README.md)

writes DEST/ansible_collections/gpuprov/inference/ (`assemble`): galaxy.yml, meta/, README.md and
plugins/ from ansible/collection/, every role of provision.role_table from
roles/, and plugins/plugin_utils/quoting.py, a copy of provision/quoting.py (standard library
only), which the collection's filter plugin imports. Then `ansible-galaxy collection build` makes
the tarball in DEST; galaxy.yml's build_ignore leaves the roles' pyinfra tasks (tasks/*.py) out.
Nothing is kept twice in the repository: the collection exists only under DEST.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from checks import packaged
from provision import filters, role_table

NAMESPACE = "gpuprov"
NAME = "inference"
# The collection's copy of provision/quoting.py, imported by plugins/filter/gpuprov.py.
SHARED = {"quoting.py": "plugins/plugin_utils/quoting.py"}
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc")
# Files whose Jinja names gpuprov's filters. A collection's role finds its collection's filters by
# their full name only (unlike its modules), so `| systemd_quote` becomes
# `| gpuprov.inference.systemd_quote`, and map('systemd_quote') likewise.
JINJA_FILES = ("templates/*.j2", "tasks/*.yml", "vars/*.yml", "defaults/*.yml", "handlers/*.yml")
# The collection's actions (plugins/action/), named short in roles/ (ansible/ansible.cfg finds
# them there) and in full in the collection, as ansible-lint's fqcn rule wants.
ACTIONS = ("gpuprov_check", "gpuprov_lock")
_ACTION_KEYS = re.compile(rf"^( *(?:- )?)({'|'.join(ACTIONS)}):", re.M)


def ansible_folder(*parts: str) -> Path:
    """A path in ansible/ (provision/ansible in a wheel). It lies beside the packaged roles in
    both layouts; an editable install cannot import provision.ansible, which has no __init__.py."""
    found = packaged.path("provision.roles").parent.joinpath("ansible", *parts)
    if not found.exists():
        raise packaged.MissingKnowledge(f"ansible/{'/'.join(parts)} is missing ({found})")
    return found


def version() -> str:
    """gpuprov's own version, which the collection carries."""
    return metadata.version("gpuprov")


@functools.cache
def _filter_names() -> re.Pattern[str]:
    names = "|".join(sorted(filters.registry(), key=len, reverse=True))
    return re.compile(rf"(\|\s*|\bmap\(\s*['\"])({names})\b")


def qualified(text: str) -> str:
    """Jinja text with every gpuprov filter and action named in full (gpuprov.inference.<x>)."""
    text = _ACTION_KEYS.sub(rf"\1{NAMESPACE}.{NAME}.\2:", text)
    return _filter_names().sub(rf"\1{NAMESPACE}.{NAME}.\2", text)


def assemble(dest: Path) -> Path:
    """Write the collection's folder under `dest` (replacing an earlier one) and return it."""
    root = dest / "ansible_collections" / NAMESPACE / NAME
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(ansible_folder("collection"), root, ignore=IGNORED)
    for role in role_table.NAMES:
        shutil.copytree(
            packaged.path("provision.roles", role), root / "roles" / role, ignore=IGNORED
        )
    for pattern in JINJA_FILES:
        for path in (root / "roles").glob(f"*/{pattern}"):
            path.write_text(qualified(path.read_text(encoding="utf-8")), encoding="utf-8")
    for source, target in SHARED.items():
        (root / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(packaged.path("provision", source), root / target)
    return root


def build(dest: Path) -> Path:
    """Assemble the collection under `dest` and build its tarball there; return the tarball."""
    root = assemble(dest)
    tarball = dest / f"{NAMESPACE}-{NAME}-{version()}.tar.gz"
    beside = Path(sys.executable).parent / "ansible-galaxy"  # ansible-core in gpuprov's venv
    galaxy = str(beside) if beside.exists() else "ansible-galaxy"
    subprocess.run(
        [galaxy, "collection", "build", "--force", "--output-path", str(dest), str(root)],
        check=True,
        capture_output=True,
        text=True,
    )
    return tarball


def _value(value: object) -> str:
    """A default as YAML writes it, on one line."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000)
    return text.strip().removesuffix("...").strip()


def _option_lines(options: dict[str, Any], indent: str = "") -> list[str]:
    lines = []
    for key, spec in options.items():
        kind = spec["type"] + (f" of {spec['elements']}" if "elements" in spec else "")
        extra = " Required." if spec.get("required") else ""
        choices = f" One of: {', '.join(map(str, spec['choices']))}." if "choices" in spec else ""
        default = f" Default: `{_value(spec['default'])}`." if "default" in spec else ""
        lines.append(f"{indent}- `{key}` ({kind}): {spec['description']}{extra}{choices}{default}")
        if spec.get("options"):
            lines += _option_lines(spec["options"], indent + "  ")
    return lines


def role_readme(role: str) -> str:
    """roles/<role>/README.md, made from its meta/argument_specs.yml and defaults/main.yml."""
    folder = packaged.path("provision.roles", role)
    spec = yaml.safe_load((folder / "meta" / "argument_specs.yml").read_text(encoding="utf-8"))
    main = spec["argument_specs"]["main"]
    defaults = (folder / "defaults" / "main.yml").read_text(encoding="utf-8").strip()
    return "\n".join(
        [
            f"# {role}",
            "",
            main["short_description"],
            "",
            f"Part of gpuprov: `gpuprov apply` runs it with pyinfra (tasks/{role}.py), Ansible as",
            f"`{NAMESPACE}.{NAME}.{role}` from the collection (or roles/ by ansible/site.yml).",
            f"It first runs gpuprov's gate on the host (`{NAMESPACE}.{NAME}.gpuprov_check`, once",
            "a play): a host the known-bad matrix blocks fails with each rule's ID, message and",
            "fix; `gpuprov_check_skip: true` overrides it, as `gpuprov apply --force` does.",
            "`--check --diff` shows what would change and changes nothing; a second run reports",
            f"no change. A play of several roles holds gpuprov's apply lock (`{NAMESPACE}.{NAME}.",
            "gpuprov_lock`, as ansible/site.yml does), so it never runs beside `gpuprov apply`.",
            "",
            "## Requirements",
            "",
            "Debian or Ubuntu with systemd. On the controller: ansible-core 2.17 or later, and",
            "gpuprov (`pip install gpuprov`) for the filters that check settings with its code.",
            "",
            "## Role variables",
            "",
            "Checked by Ansible before the role runs (meta/argument_specs.yml), then ranges by",
            "the role's first tasks, with gpuprov's bounds (provision/settings).",
            "",
            *_option_lines(main["options"]),
            "",
            "The defaults, with their comments (defaults/main.yml):",
            "",
            "```yaml",
            defaults,
            "```",
            "",
            "## Example playbook",
            "",
            "```yaml",
            f"- name: {role} on the GPU hosts",
            "  hosts: gpu",
            "  become: true",
            "  roles:",
            f"    - role: {NAMESPACE}.{NAME}.{role}",
            "```",
            "",
            "## License",
            "",
            "Apache-2.0",
            "",
        ]
    )


def write_readmes() -> None:
    """Write every role's README.md (run after changing an argument spec or the defaults)."""
    for role in role_table.NAMES:
        (packaged.path("provision.roles", role) / "README.md").write_text(
            role_readme(role), encoding="utf-8"
        )


def main(argv: list[str]) -> int:
    if argv[:1] == ["--readmes"]:
        write_readmes()
        return 0
    print(build(Path(argv[0] if argv else "build/collection").resolve()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
