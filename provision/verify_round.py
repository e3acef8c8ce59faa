"""One round of the post-apply check, run on the host by `python3 -c` (Python 3.8+, stdlib only).

argv[1] is JSON: {"units": [unit, ...], "probes": [[unit, url, model, env_file, kind], ...],
"canary": path of the canary script or "", "timeout": seconds per probe}. Prints one JSON object:
{"units": {unit: {property: value}}, "probes": {unit: [result, detail]}}. The probes are the
canary's own (its `probe` and `probe_openai`), so a server passes here exactly when it would pass
the canary; without the canary script the probes are reported as not run.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from typing import Any

PROPERTIES = "ActiveState,SubState,Result,NRestarts,ExecMainStatus,ExecMainStartTimestampMonotonic"


def unit_state(unit: str) -> dict[str, str]:
    try:
        done = subprocess.run(
            ["systemctl", "show", "-p", PROPERTIES, "--", unit],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return {"error": type(exc).__name__}
    found = {}
    for line in done.stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            found[key] = value
    return found


def canary_module(path: str) -> Any:
    if not path:
        return None
    try:
        spec = importlib.util.spec_from_file_location("gpuprov_canary", path)
        if spec is None or spec.loader is None:
            return None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception:  # no canary script, or no python3-requests: the probes cannot run
        return None
    return module


def probe(canary: Any, target: list[str], timeout: float) -> list[str]:
    _, url, model, env_file, kind = target
    if canary is None:
        return ["not run", "the canary script or python3-requests is missing"]
    try:
        if kind == "llama":
            result, detail = canary.probe(url, model, canary.read_key(env_file), timeout)
        else:
            key = canary.read_key(env_file, "VLLM_API_KEY")
            result, detail = canary.probe_openai(url, model, key, timeout)
    except Exception as exc:  # the canary's own probes catch what they expect
        return ["fail", f"{type(exc).__name__}: {exc}"]
    return [str(result), str(detail)]


def main() -> None:
    request = json.loads(sys.argv[1])
    canary = canary_module(request.get("canary") or "") if request["probes"] else None
    out = {
        "units": {unit: unit_state(unit) for unit in request["units"]},
        "probes": {t[0]: probe(canary, t, request["timeout"]) for t in request["probes"]},
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
