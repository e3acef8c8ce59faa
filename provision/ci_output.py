"""`--format sarif|junit` for check, explain and plan: findings as CI systems read them.

SARIF 2.1.0 goes to GitHub code scanning (upload-sarif) and GitLab; JUnit XML to the test report
views of GitHub Actions and GitLab CI. Both are printed on stdout; exit codes stay the command's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from enum import Enum
from typing import Annotated

import typer

from checks.reporting.ci_subjects import Subject


class CiFormat(str, Enum):
    sarif = "sarif"
    junit = "junit"


FormatOption = Annotated[
    CiFormat | None,
    typer.Option(
        "--format",
        help="sarif (code scanning) or junit (CI test reports) on stdout, instead of text.",
    ),
]


def emit(fmt: CiFormat, subjects: Sequence[Subject], suite: str, inventory: str | None) -> None:
    """Print the subjects in `fmt`."""
    if fmt is CiFormat.sarif:
        from checks.reporting.sarif import sarif

        print(json.dumps(sarif(subjects, inventory), indent=2))
    else:
        from checks.reporting.junit import junit

        print(junit(subjects, suite), end="")
