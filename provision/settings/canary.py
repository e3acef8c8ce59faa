"""The canary role's settings: how often it probes the servers, when it restarts one, and where
it writes its metrics for node_exporter's textfile collector."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from provision.settings import read
from provision.settings.read import StackError

# Debian's and Ubuntu's prometheus-node-exporter reads this folder when ARGS sets no other
# (its --collector.textfile.directory default; the package creates the folder).
DEBIAN_TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"


@dataclass(frozen=True)
class Canary:
    enabled: bool = True
    interval: int = 30
    timeout: int = 20
    failures: int = 2
    cool_down: int = 300
    metrics_dir: str = DEBIAN_TEXTFILE_DIR  # "": no metrics
    node_exporter: bool = False


def parse(v: Mapping[str, Any]) -> Canary:
    return Canary(
        enabled=read.boolean(v, "canary_enabled"),
        interval=read.integer(v, "canary_interval", 5, 86400),
        timeout=read.integer(v, "canary_timeout", 1, 600),
        failures=read.integer(v, "canary_failures", 1, 100),
        cool_down=read.integer(v, "canary_cool_down", 0, 86400),
        metrics_dir=metrics_dir(v),
        node_exporter=node_exporter(v),
    )


def metrics_dir(v: Mapping[str, Any]) -> str:
    """canary_metrics_dir: "" (no metrics), or an absolute path without spaces."""
    if not read.text(v, "canary_metrics_dir", empty=True):
        return ""
    return read.unit_path(v, "canary_metrics_dir")


def node_exporter(v: Mapping[str, Any]) -> bool:
    """canary_node_exporter, which needs a folder to point node_exporter's textfile collector at."""
    wanted = read.boolean(v, "canary_node_exporter")
    if wanted and not read.text(v, "canary_metrics_dir", empty=True):
        raise StackError("canary_node_exporter", "needs canary_metrics_dir (it is empty)")
    return wanted
