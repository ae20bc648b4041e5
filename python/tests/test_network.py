"""The Python package against a real `trellis serve`: up, commands, links, impairments,
counters, diff and apply, errors, a server started by up, capture."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time

import pytest

import trellis


def ping_ok(node: trellis.Node, addr: str, wait: float = 5.0) -> bool:
    """Whether node reaches addr within wait seconds (address resolution after a link comes
    back takes up to a second, as on a real network)."""
    deadline = time.monotonic() + wait
    while True:
        if node.run(["ping", "-c1", "-W1", addr]).ok:
            return True
        if time.monotonic() > deadline:
            return False


def test_up_cmd_and_down(client: trellis.Client, topo) -> None:
    with trellis.up(topo("pyup"), client=client) as net:
        assert net.name == "pyup"
        assert sorted(net.nodes) == ["a", "b"] and list(net.links) == ["a-b"]
        a = net.nodes["a"]
        assert "10.0.0.1/24" in a.cmd("ip -o -4 addr show eth1")
        assert a.cmd(["hostname"]) == "a\n"
        assert a.cmd("tr a-z A-Z", stdin="hi\n") == "HI\n"
        r = a.run("echo out; echo err >&2; exit 4")
        assert (r.exit_code, r.stdout, r.stderr, r.ok) == (4, "out\n", "err\n", False)
        with pytest.raises(trellis.CommandError) as failed:
            a.cmd("exit 3", check=True)
        assert failed.value.result.exit_code == 3
        assert a.run(["sleep", "10"], timeout=0.3).timed_out
        assert ping_ok(a, "10.0.0.2")
        assert net.nodes["b"].info()["running"]
        assert any(n["name"] == "pyup" for n in trellis.networks(client=client))
    with pytest.raises(trellis.APIError) as e:
        trellis.connect("pyup", client=client)
    assert e.value.status == 404


def test_links_impairments_and_counters(client: trellis.Client, topo) -> None:
    with trellis.up(topo("pylink"), client=client) as net:
        a, link = net.nodes["a"], net.links["a-b"]
        assert net.links[("b", "a")] is link and net.links["a-b"] is link
        assert ping_ok(a, "10.0.0.2")
        before = net.counters()["a-b"]["a:eth1"]["tx_packets"]
        a.cmd("ping -c5 -i0.05 10.0.0.2", check=True)
        c = link.counters()
        assert c["a:eth1"]["tx_packets"] - before >= 5 and c["b:eth1"]["rx_packets"] >= 5

        link.down()
        assert link.info()["state"] == "down"
        assert not a.run(["ping", "-c1", "-W1", "10.0.0.2"]).ok
        link.up()
        assert ping_ok(a, "10.0.0.2")

        link.set(loss=100, endpoint="a:eth1")
        eps = {f"{e['node']}:{e['interface']}": e for e in link.info()["endpoints"]}
        assert eps["a:eth1"]["impairment"] == "loss 100%" and "impairment" not in eps["b:eth1"]
        assert not a.run(["ping", "-c2", "-i0.2", "-W1", "10.0.0.2"]).ok
        assert link.counters()["a:eth1"]["impair_drops"] >= 2
        link.set(duplicate=1, corrupt=0.5, loss=2, correlation=25)
        eps = {e["node"]: e for e in link.info()["endpoints"]}
        assert eps["a"]["impairment"] == eps["b"]["impairment"] == "loss 2%, correlation 25%, duplicate 1%, corrupt 0.5%"
        link.set()
        link.set(delay="50ms", jitter="1ms", distribution="normal", endpoint="a:eth1")
        eps = {e["node"]: e for e in link.info()["endpoints"]}
        assert eps["a"]["impairment"] == "delay 50ms, jitter 1ms normal" and "impairment" not in eps["b"]
        rtt = a.run(["ping", "-c3", "-i0.2", "10.0.0.2"]).stdout
        # One way, a's frames only: each RTT is 50 ms plus a normal draw of sd 1 ms (and the
        # path's own fraction of a ms), so none below 50 - 5 sd (a chance of 3e-7 each).
        assert "time=" in rtt and all(float(t.split("=")[1]) >= 45 for t in rtt.split() if t.startswith("time=")), rtt
        link.set()
        assert all("impairment" not in e for e in link.info()["endpoints"])
        assert ping_ok(a, "10.0.0.2")


def test_diff_and_apply(client: trellis.Client, topo) -> None:
    with trellis.up(topo("pydiff"), client=client) as net:
        changed = topo("pydiff", "    rate: 10mbit\n    from: {a:eth1: {loss: 1%}}\n", "changed.yaml")
        diff = net.diff(changed)
        # The link names no connector: one veth pair until the rate gives it ports (re-plugged).
        assert [str(c) for c in diff] == [
            "~ link a-b: connector veth -> shortbridge (a:eth1, b:eth1 to ports re-plugged: made anew, so their nodes"
            " see the carrier drop and come back, with a new ifindex; addresses and routes their nodes' software set on"
            " them go; a point-to-point link that names no connector is one veth pair while it has nothing to enforce;"
            " `connector: shortbridge` in the file keeps its ports, never re-plugged); rate none -> 10mbit;"
            " impairment from a:eth1 none -> loss 1%"]
        pid = net.nodes["a"].info()["pid"]
        assert [str(c) for c in net.apply(changed)] == [str(c) for c in diff]
        assert net.diff(changed) == []
        assert net.links["a-b"].info()["rate"] == "10mbit"
        assert net.nodes["a"].info()["pid"] == pid, "a live change restarted a node"


def test_errors(client: trellis.Client, topo, tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: pybad\nnodes:\n  a: {}\n  b: {}\nlinks:\n  - endpoints: [a:eth1, b:eth1]\n    rate: fast\n")
    with pytest.raises(trellis.APIError) as e:
        trellis.up(str(bad), client=client)
    err = e.value
    assert err.status == 422 and len(err.errors) == 1
    p = err.errors[0]
    assert (p.file, p.line, p.field) == (str(bad), 7, "links[0].rate") and p.fix
    assert f"{bad}:7: links[0].rate: " in str(err)
    assert not any(n["name"] == "pybad" for n in trellis.networks(client=client))
    with trellis.up(topo("pyerr"), client=client) as net:
        with pytest.raises(KeyError):
            net.nodes["zz"]
        with pytest.raises(KeyError):
            net.links["a-c"]
        with pytest.raises(trellis.APIError) as e:
            trellis.Node(net, "zz").cmd("true")
        assert e.value.status == 404
        with pytest.raises(trellis.APIError) as e:
            net.links["a-b"].set(loss=150)
        assert e.value.status == 422 and e.value.errors[0].location == "body.loss"
        with pytest.raises(trellis.APIError) as e:
            net.links["a-b"].down(endpoint="c:eth1")
        assert e.value.status == 404


def test_up_starts_a_server(trellis_bin: str, topo) -> None:
    """With no server on the state directory, up starts one, and on exit removes the network
    and stops the server."""
    sd = tempfile.mkdtemp(prefix="trpy2")
    sock = os.path.join(sd, "trellis.sock")
    try:
        with trellis.up(topo("pyserve"), state_dir=sd) as net:
            assert os.path.exists(sock)
            assert net.nodes["b"].cmd("hostname") == "b\n"
        assert not os.path.exists(sock), "the server up started is still there"
        ls = subprocess.run([trellis_bin, "--state-dir", sd, "ls"], check=True, capture_output=True, text=True)
        assert "pyserve" not in ls.stdout
    finally:
        subprocess.run([trellis_bin, "--state-dir", sd, "down", "--all"], check=False, capture_output=True)
        shutil.rmtree(sd, ignore_errors=True)


CAPTURE_PATH = "/networks/{network}/links/{link}/capture"


def test_capture(client: trellis.Client, topo, tmp_path) -> None:
    paths = client.request("GET", "/openapi.json")["paths"]
    assert CAPTURE_PATH in paths, f"GET {CAPTURE_PATH} is missing from the OpenAPI document"
    with trellis.up(topo("pycap"), client=client) as net:
        a = net.nodes["a"]
        assert ping_ok(a, "10.0.0.2")
        pinger = threading.Timer(0.5, lambda: a.cmd("ping -c3 -i0.2 10.0.0.2"))
        pinger.start()
        out = tmp_path / "a-b.pcapng"
        data = net.capture("a-b", count=4, filter="icmp", file=str(out), timeout=30)
        pinger.join()
        assert data[:4] == b"\x0a\x0d\x0d\x0a", "not pcapng"
        assert out.read_bytes() == data
