"""How steps that cross the network are retried: apt installs and image pulls.

Mirrors and registries fail transiently. pyinfra runs such an operation again after a pause and
prints "Retrying <operation> (attempt N/M)"; the Ansible tasks use the same numbers, and
llama-build.sh retries its own source fetch (a failed compile is never retried).
"""

ATTEMPTS = 2  # retries after the first try
DELAY = 10  # seconds between tries
