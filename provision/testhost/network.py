"""Test host networking: host N lives in namespace gp-NAME and answers on 10.213.N.2.

The machine's side of the host's veth pair (gphN) is 10.213.N.1. Nothing else is exposed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from provision.testhost.machine import TestHostError, run

SUBNET = "10.213"
MAX_INDEX = 200
_VETH = re.compile(r"^\d+:\s+gph(\d+)[@:]")


def netns_name(name: str) -> str:
    return f"gp-{name}"


def veth_name(index: int) -> str:
    """The machine's end of host `index`'s veth pair."""
    return f"gph{index}"


def address(index: int) -> str:
    """The host's address inside its namespace."""
    return f"{SUBNET}.{index}.2"


def gateway(index: int) -> str:
    """The machine's address facing host `index`."""
    return f"{SUBNET}.{index}.1"


def pick_index(used: Iterable[int]) -> int:
    """The lowest free index in 1..MAX_INDEX."""
    taken = set(used)
    for index in range(1, MAX_INDEX + 1):
        if index not in taken:
            return index
    raise TestHostError(f"all {MAX_INDEX} test host slots are taken: bring some down")


def veth_indexes(ip_link_output: str) -> set[int]:
    """Indexes of gphN links in `ip -o link` output."""
    return {int(m.group(1)) for m in map(_VETH.match, ip_link_output.splitlines()) if m}


def netns_commands(name: str, index: int) -> list[list[str]]:
    """Make the namespace, its veth pair and addresses."""
    ns, veth = netns_name(name), veth_name(index)
    return [
        ["ip", "netns", "add", ns],
        ["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns],
        # No IPv6 link-local addresses: the pair carries only 10.213.N.0/24.
        ["ip", "link", "set", veth, "addrgenmode", "none"],
        ["ip", "-n", ns, "link", "set", "eth0", "addrgenmode", "none"],
        ["ip", "addr", "add", f"{gateway(index)}/24", "dev", veth],
        ["ip", "link", "set", veth, "up"],
        ["ip", "-n", ns, "addr", "add", f"{address(index)}/24", "dev", "eth0"],
        ["ip", "-n", ns, "link", "set", "lo", "up"],
        ["ip", "-n", ns, "link", "set", "eth0", "up"],
    ]


def veths_in_use() -> set[int]:
    """Indexes of the gphN links on this machine."""
    return veth_indexes(run(["ip", "-o", "link"]).stdout)


def add(name: str, index: int) -> None:
    """Make host `name`'s namespace and veth pair at `index`."""
    for command in netns_commands(name, index):
        run(command)


def netns_exists(ns: str) -> bool:
    return Path("/run/netns", ns).exists()


def remove_netns(name: str) -> bool:
    """Delete host `name`'s namespace; False when there was none."""
    ns = netns_name(name)
    if not netns_exists(ns):
        return False
    run(["ip", "netns", "del", ns])
    return True


def remove_veth(index: int) -> None:
    """Delete the machine's end of veth pair `index` if it is still there."""
    if Path("/sys/class/net", veth_name(index)).exists():
        run(["ip", "link", "del", veth_name(index)], check=False)
