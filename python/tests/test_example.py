"""examples/python/ospf_ring.py, as docs/python.md shows it, runs and says what it should."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

from conftest import REPO, missing


def test_ospf_ring_example(trellis_bin: str) -> None:
    if not shutil.which("bird"):
        missing("the OSPF ring runs BIRD: install bird2 (apt-get install bird2; scripts/setup.sh does)")
    sd = tempfile.mkdtemp(prefix="trpyx")
    env = dict(os.environ, TRELLIS_STATE_DIR=sd, TRELLIS_BIN=trellis_bin)
    try:
        out = subprocess.run(
            [sys.executable, str(REPO / "examples" / "python" / "ospf_ring.py")],
            env=env, capture_output=True, text=True, timeout=300,
        )
        assert out.returncode == 0, out.stderr
        for want in ["<Network ospf-ring: 4 nodes, 4 links>", "r1 reaches r2's loopback through eth1",
                     "with r1-r2 down, through eth2", "  + node r5", "  + link r1-r5"]:
            assert want in out.stdout, out.stdout
        loss = float(out.stdout.split("r3's side: ")[1].split("%")[0])
        assert 8 <= loss <= 35, f"20% loss configured, {loss}% measured over 200 pings"
        ls = subprocess.run([trellis_bin, "--state-dir", sd, "ls"], capture_output=True, text=True, check=True)
        assert "ospf-ring" not in ls.stdout, "the example left its network"
    finally:
        subprocess.run([trellis_bin, "--state-dir", sd, "down", "--all"], check=False, capture_output=True)
        shutil.rmtree(sd, ignore_errors=True)
