"""Fixtures: a real `trellis serve` (run as root) on a state directory of the test session.

The tests need root and the trellis binary ($TRELLIS_BIN, or bin/trellis of the repository,
or trellis on PATH); without them they are skipped, saying why and how to get what is missing,
except in CI (TRELLIS_CI=1, set by scripts/test.sh), where a missing piece fails the test as
internal/testkit does for the Go tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

import trellis

REPO = Path(__file__).resolve().parents[2]


def missing(why: str) -> None:
    """Skips the calling test for want of what `why` names (with how to install it), or fails
    it in CI, where every piece must be there: scripts/setup.sh installs them."""
    if os.environ.get("TRELLIS_CI") == "1":
        pytest.fail(f"CI cannot skip: {why}", pytrace=False)
    pytest.skip(why)


def _binary() -> str:
    for cand in (os.environ.get("TRELLIS_BIN"), str(REPO / "bin" / "trellis"), shutil.which("trellis")):
        if cand and os.access(cand, os.X_OK):
            return cand
    return ""


@pytest.fixture(scope="session")
def trellis_bin() -> str:
    if os.geteuid() != 0:
        missing("trellis needs root: run the Python tests as root (scripts/test.sh does)")
    path = _binary()
    if not path:
        missing("no trellis binary: build bin/trellis (scripts/setup.sh) or set TRELLIS_BIN")
    os.environ["TRELLIS_BIN"] = path
    return path


@pytest.fixture(scope="session")
def state_dir(trellis_bin: str) -> Iterator[str]:
    """A state directory of its own (a short path: unix socket paths are limited); whatever
    the tests leave in it is taken down at the end."""
    d = tempfile.mkdtemp(prefix="trpy")
    yield d
    subprocess.run([trellis_bin, "--state-dir", d, "down", "--all"], check=False, capture_output=True)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def client(state_dir: str) -> Iterator[trellis.Client]:
    server = trellis.Server(state_dir)
    c = server.start()
    yield c
    server.stop()
    assert not os.path.exists(server.socket), "trellis serve left its socket"


TWO = """name: {name}
nodes:
  a: {{addresses: {{eth1: [10.0.0.1/24]}}}}
  b: {{addresses: {{eth1: [10.0.0.2/24]}}}}
links:
  - name: a-b
    endpoints: [a:eth1, b:eth1]
{extra}"""


@pytest.fixture
def topo(tmp_path: Path):
    """topo(name, extra="") writes a two-node topology file and returns its path."""

    def write(name: str, extra: str = "", file: str = "two.yaml") -> str:
        p = tmp_path / file
        p.write_text(TWO.format(name=name, extra=extra))
        return str(p)

    return write
