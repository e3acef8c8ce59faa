"""Render every rule's documentation into one Markdown page (docs/rules.md)."""

from __future__ import annotations

from checks.matrix import registry


def rules_markdown() -> str:
    parts = [
        "# The known-bad matrix\n\n",
        "Generated from checks/matrix/rules/*.toml by\n"
        "`python -m checks.matrix.docs > docs/rules.md`.\n",
        "`gpuprov rules ID` prints one entry.\n\n",
        "Each rule says what detects it:\n\n",
    ]
    parts += [f"- {route}: {what}\n" for route, what in registry.ROUTES.items()]
    parts += ["\n| ID | severity | title |\n| --- | --- | --- |\n"]
    parts += [
        f"| [{r.id}](#{r.id.lower()}) | {r.severity} | {r.title} |\n" for r in registry.rules()
    ]
    for rule in registry.rules():
        parts.append(
            "\n"
            + rule.docs().replace(f"# {rule.id}:", f"## {rule.id}:", 1).replace("\n## ", "\n### ")
        )
    return "".join(parts)


if __name__ == "__main__":
    print(rules_markdown(), end="")
