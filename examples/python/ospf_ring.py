#!/usr/bin/env python3
"""The OSPF ring from Python: bring it up, wait for OSPF, cut a link and watch the routes move
around the ring, impair another and measure the loss, read counters; the ring is removed on exit.

Run as root from the repository, with trellis on PATH (or TRELLIS_BIN=bin/trellis):

    pip install ./python
    python3 examples/python/ospf_ring.py

It uses the `trellis serve` of /var/lib/trellis if one runs, else starts one for its duration
(TRELLIS_STATE_DIR names another state directory).
"""

import os
import re
import sys
import time

import trellis

RING = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ospf-ring", "ring.yaml")


def wait_for(what, check, timeout=60.0):
    """Poll check() until it is true, or give up after timeout seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            sys.exit(f"gave up waiting for {what}")
        time.sleep(0.5)


def route_dev(node, addr):
    """The interface node sends to addr through, or None without a route."""
    m = re.search(r"\bdev (\S+)", node.cmd(["ip", "route", "get", addr]))
    return m.group(1) if m else None


def ospf_full(node):
    """How many of node's OSPF neighbours (BIRD) are in state Full."""
    return node.cmd(["birdc", "-s", "/run/bird/bird.ctl", "show", "ospf", "neighbors"]).count("Full/")


def main():
    with trellis.up(RING) as net:
        print(net)
        r1, r3 = net.nodes["r1"], net.nodes["r3"]
        # Converged: both of r1's neighbours Full, and every loopback answering (a loopback can
        # answer the long way round while an adjacency is still forming).
        wait_for("OSPF", lambda: ospf_full(r1) == 2
                 and all(r1.run(["ping", "-c1", "-W1", f"10.255.0.{i}"]).ok for i in (2, 3, 4)))
        print("r1's routes once OSPF has converged:")
        print(r1.cmd("ip route"))

        print("r1 reaches r2's loopback through", route_dev(r1, "10.255.0.2"))
        net.links["r1-r2"].down()  # pull the cable: both ends see NO-CARRIER at once
        wait_for("the route around the ring", lambda: route_dev(r1, "10.255.0.2") == "eth2")
        print("with r1-r2 down, through", route_dev(r1, "10.255.0.2"))
        net.links["r1-r2"].up()

        link = net.links["r3-r4"]
        link.set(loss=20, endpoint="r3:eth1")  # what r3 sends to r4
        wait_for("r4 from r3", lambda: r3.run(["ping", "-c1", "-W1", "10.255.0.4"]).ok)
        out = r3.cmd("ping -q -c 200 -i 0.01 -W 1 10.0.34.1")
        print("ping over r3-r4 with 20% loss on r3's side:", re.search(r"[0-9.]+% packet loss", out).group(0))
        link.set()  # no impairment again
        print("r3-r4 counters:", link.counters())

        print("diff against ring5.yaml (nothing is changed):")
        for change in net.diff(os.path.join(os.path.dirname(RING), "ring5.yaml")):
            print(" ", change)


if __name__ == "__main__":
    main()
