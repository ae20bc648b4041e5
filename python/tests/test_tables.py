"""The tables of a node's dataplane program from Python: through the API (Node.table), and
from a process inside the node through its table socket (NodeTables), with real traffic:
examples/ebpf/l3's s1 forwards h1's pings to h2 once its routes are filled."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import trellis
from conftest import REPO, missing

SRC = REPO / "python" / "src" / "trellis" / "tables.py"


@pytest.fixture
def l3(client: trellis.Client, tmp_path: Path):
    if not shutil.which("clang"):
        missing("clang is not installed: it compiles the node's program (apt-get install clang; scripts/setup.sh)")
    for f in ("l3.yaml", "l3.c"):
        shutil.copy(REPO / "examples" / "ebpf" / "l3" / f, tmp_path / f)
    with trellis.up(str(tmp_path / "l3.yaml"), client=client) as net:
        yield net


def _mac(net: trellis.Network, node: str) -> bytes:
    return bytes.fromhex(net.nodes[node].cmd("cat /sys/class/net/eth1/address", check=True).strip().replace(":", ""))


def _pings(net: trellis.Network) -> bool:
    return net.nodes["h1"].run("ping -c 1 -W 1 10.0.2.1").ok


def test_table_through_api(l3: trellis.Network) -> None:
    s1 = l3.nodes["s1"]
    names = {t["name"]: t for t in s1.tables()}
    assert names["routes"]["key_size"] == 8 and names["trellis_ports"]["read_only"], names
    routes = s1.table("routes")
    assert routes.dump() == {} and not _pings(l3)
    routes.set("18000000.0a000100", _mac(l3, "h1") + b"\x01\x00")  # 10.0.1.0/24: port 1
    routes[bytes.fromhex("180000000a000200")] = _mac(l3, "h2") + b"\x02\x00"  # 10.0.2.0/24: port 2
    assert _pings(l3), "h1 does not reach h2 with the routes set through the API"
    assert routes.get("180000000a000200") == _mac(l3, "h2") + b"\x02\x00"
    assert len(routes.dump()) == 2 and "180000000a000100" in routes
    assert int.from_bytes(s1.table("counters")[b"\0\0\0\0"], "little") >= 2
    with pytest.raises(trellis.APIError) as e:
        routes.set("0a000200", b"\0" * 8)
    assert e.value.status == 422 and "the key is 4 bytes, the table's keys are 8" in e.value.detail
    with pytest.raises(trellis.APIError) as e:
        s1.table("route").dump()
    assert e.value.status == 404 and "the program's tables are counters, routes, trellis_ports" in e.value.detail
    with pytest.raises(trellis.APIError) as e:
        s1.table("trellis_ports").set(b"\1\0\0\0", b"\0\0\0\0")
    assert e.value.status == 403
    routes.delete(bytes.fromhex("180000000a000200"))
    assert not _pings(l3), "h1 still reaches h2 after the route was deleted"
    with pytest.raises(KeyError):
        routes.delete(bytes.fromhex("180000000a000200"))
    assert routes.get("180000000a000200") is None


def test_node_tables_inside_the_node(l3: trellis.Network) -> None:
    """A controller in s1 (python3 run as s1's root, with tables.py alone) fills the routes."""
    h1, h2 = _mac(l3, "h1").hex(), _mac(l3, "h2").hex()
    script = SRC.read_text() + f"""
with NodeTables() as t:
    routes = t.table("routes")
    routes.set("18000000.0a000100", bytes.fromhex("{h1}0100"))
    routes["180000000a000200"] = bytes.fromhex("{h2}0200")
    print(sorted(x["name"] for x in t.tables()))
    try:
        t.table("trellis_ports").set(b"\\1\\0\\0\\0", b"\\0\\0\\0\\0")
    except TableError as e:
        print("refused:", e)
"""
    r = l3.nodes["s1"].run(["python3", "-"], stdin=script)
    assert r.ok, r.stderr
    assert "['counters', 'routes', 'trellis_ports']" in r.stdout and "refused:" in r.stdout and "read-only" in r.stdout, r.stdout
    assert _pings(l3), "h1 does not reach h2 with the routes set from inside s1"
    assert l3.nodes["s1"].table("routes").get("180000000a000200") == bytes.fromhex(h2 + "0200")
