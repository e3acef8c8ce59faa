"""Swap latency of a swap group: a request for member B while A is loaded -> B's completion.

Starts a test host (gpuprov testhost), applies two llama.cpp profiles in one swap group with the
tiny model (a CPU build of the llama.cpp vendored in the llama-cpp-python sdist the end-to-end
tests use), then alternates requests between them --runs times. Prints the median swap latency,
the median of the server's own start (process start to ready, from systemd's timestamps), and
their difference: what the socket, systemd-socket-proxyd and the stop of the other member add.
Rookery, the anchor, reports ~10 s per swap with real models; with the tiny model the load itself
is near zero, so the overhead is the number to compare.

    .venv/bin/python benchmarks/swap_latency.py --runs 9 [--keep]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from provision.testhost import hosts  # noqa: E402
from provision.testhost.state import state_dir  # noqa: E402
from tests.e2e.hosts import Host, Inventory, apply, put_tiny_model  # noqa: E402
from tests.e2e.test_on_demand import complete, load_seconds  # noqa: E402

MODEL = "/srv/models/tiny.gguf"
ROOKERY_SECONDS = 10.0
NAME = "swapbench"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--keep", action="store_true", help="leave the test host running")
    args = parser.parse_args()
    sdists = sorted((state_dir() / "sources").glob("llama_cpp_python-*.tar.gz"))
    if not sdists:
        raise SystemExit("run the end-to-end tests once first: they download the sdist")
    host = Host(hosts.up(NAME, volumes=[(str(state_dir() / "ccache"), hosts.CCACHE_MOUNT)]))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            put_tiny_model(host, Path(tmp), MODEL)
            members = [
                {"name": n, "model": MODEL, "port": p, "ctx_size": 256, "swap_group": "pair"}
                for n, p in (("bench-a", 8092), ("bench-b", 8093))
            ]
            base = {
                "llama_cpp_tarball": str(sdists[-1]),
                "llama_cpp_tarball_subdir": "vendor/llama.cpp",
                "llama_server_profiles": members,
            }
            inventory = Inventory(Path(tmp) / "inventory.py", host.record, base)
            code, _, stderr = apply(inventory)
            if code != 0:
                raise SystemExit(stderr[-3000:])
            complete(host, 8092)  # A loaded
            swaps, loads = [], []
            for i in range(args.runs):
                port, name = (8093, "bench-b") if i % 2 == 0 else (8092, "bench-a")
                _, seconds = complete(host, port)
                swaps.append(seconds)
                loads.append(load_seconds(host, f"gpuprov-llama-{name}.service"))
    finally:
        if not args.keep:
            hosts.down(NAME)
    swap, load = statistics.median(swaps), statistics.median(loads)
    spread = f"range {min(swaps):.3f}-{max(swaps):.3f}, {args.runs} swaps"
    print(f"swap latency median {swap:.3f} s ({spread})")
    print(f"server's own start median {load:.3f} s; overhead {swap - load:.3f} s")
    print(
        f"ratio swap/Rookery's ~{ROOKERY_SECONDS:g} s = {swap / ROOKERY_SECONDS:.3f} (tiny model)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
