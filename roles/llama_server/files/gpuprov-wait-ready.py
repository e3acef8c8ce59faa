#!/usr/bin/env python3
"""Wait until a server's health URL answers 200, then exit 0; exit 1 after TIMEOUT seconds.

An on-demand server's unit (a llama-server profile or a vLLM replica) runs this as its
ExecStartPost, so the unit is started (and the socket proxy ordered after it connects) only once
the server can answer. Until then: llama-server answers /health with 503 while it loads the
model; vLLM's port refuses the connection until the model is loaded, or, published by docker,
accepts it and closes it without a reply. Usage: gpuprov-wait-ready.py URL TIMEOUT
"""

import http.client
import sys
import time
import urllib.error
import urllib.request


def main(argv: list[str]) -> int:
    url, timeout = argv[1], float(argv[2])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as reply:
                if reply.status == 200:
                    return 0
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException):
            pass  # not listening yet, closed without a reply, or 503 while loading
        time.sleep(0.1)
    print(f"gpuprov-wait-ready: {url} did not answer 200 within {timeout:g}s", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
