"""Findings as JUnit XML, for the test reports of CI systems (GitHub Actions, GitLab CI).

One <testsuite> per host or log. On a host every matrix rule is a test case (classname: its area),
failed by its error and warning findings and passed otherwise; info findings pass and show in
<system-out>. A log has one case per diagnosis, or one passing "explain" case when nothing matched.
A host or log that could not be read is one case with an <error>.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import TYPE_CHECKING

from checks.matrix import registry
from checks.matrix.engine import SEVERITY_RANK, Finding
from checks.reporting.ci_subjects import HOST, Subject, area, where, xml_text

if TYPE_CHECKING:
    from checks.logs.explain import Diagnosis

FAILING = ("error", "warning")
COUNTS = ("tests", "failures", "errors", "skipped")


def junit(runs: Sequence[Subject], suite: str) -> str:
    """The JUnit XML document (text, UTF-8 declared) for `runs`, under <testsuites name=suite>."""
    root = ET.Element("testsuites", name=xml_text(suite))
    root.extend(testsuite(subject) for subject in runs)
    for key in COUNTS:
        root.set(key, str(sum(int(s.get(key, "0")) for s in root)))
    ET.indent(root)
    document: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return document.decode("utf-8") + "\n"


def testsuite(subject: Subject) -> ET.Element:
    """One subject's <testsuite>, with its counts."""
    element = ET.Element("testsuite", name=xml_text(subject.name))
    element.extend(_cases(subject))
    cases = element.findall("testcase")
    element.set("tests", str(len(cases)))
    element.set("failures", str(sum(c.find("failure") is not None for c in cases)))
    element.set("errors", str(sum(c.find("error") is not None for c in cases)))
    element.set("skipped", "0")
    return element


def _cases(subject: Subject) -> list[ET.Element]:
    if subject.unreachable is not None:
        verb = "check" if subject.kind == HOST else "read"
        case = _case("gpuprov", f"{verb} {subject.name}")
        ET.SubElement(
            case, "error", message=xml_text(subject.unreachable), type="unreachable"
        ).text = xml_text(f"{subject.name}: {subject.unreachable}")
        return [case]
    if subject.kind == HOST:
        return _host_cases(subject.findings)
    cases = [testcase(area(d), f"{d.rule} {d.title}", [d]) for d in subject.findings]
    return cases or [_case("gpuprov", "explain")]


def _host_cases(findings: Sequence[Finding | Diagnosis]) -> list[ET.Element]:
    """A case per matrix rule, then one per rule a finding names that the matrix lacks."""
    rules = registry.rules()
    known = {rule.id for rule in rules}
    cases = [
        testcase(rule.area, f"{rule.id} {rule.title}", [f for f in findings if f.rule == rule.id])
        for rule in rules
    ]
    for rule_id in sorted({f.rule for f in findings} - known):
        hits = [f for f in findings if f.rule == rule_id]
        cases.append(testcase(area(hits[0]), f"{rule_id} {hits[0].title}", hits))
    return cases


def testcase(classname: str, name: str, items: Sequence[Finding | Diagnosis]) -> ET.Element:
    """A case failed by its error and warning items; info items pass, shown in <system-out>."""
    case = _case(classname, name)
    failing = [i for i in items if i.severity in FAILING]
    details = xml_text("\n\n".join(describe(i) for i in items))
    if failing:
        worst = min(failing, key=lambda i: SEVERITY_RANK[i.severity])
        message = " | ".join(i.message for i in failing)
        failure = ET.SubElement(case, "failure", message=xml_text(message), type=worst.severity)
        failure.text = details
    elif items:
        ET.SubElement(case, "system-out").text = details
    return case


def describe(item: Finding | Diagnosis) -> str:
    """An item in full: severity, message, what on the host, fix, sources, a log's evidence."""
    lines = [f"[{item.severity}] {item.message}"]
    if where(item):
        lines.append(f"Subject: {where(item)}")
    lines += [f"Fix: {item.fix}", "Sources:"]
    lines += [f"  - {c}" for c in item.citations]
    if not isinstance(item, Finding) and item.evidence:
        lines.append("Evidence:")
        lines += [f"  line {number}: {text}" for number, text in item.evidence]
    return "\n".join(lines)


def _case(classname: str, name: str) -> ET.Element:
    return ET.Element("testcase", classname=xml_text(classname), name=xml_text(name))
