"""A client of `trellis serve --listen` (a loopback URL): it needs the server's token, which it
reads from the token file (root), $TRELLIS_TOKEN or its ``token`` parameter; a file it sends
names no path on the server's machine."""

from __future__ import annotations

import signal
import socket
import subprocess
from typing import Iterator

import pytest

import trellis


@pytest.fixture
def url(trellis_bin: str, state_dir: str, tmp_path) -> Iterator[str]:
    """A second `trellis serve` of the session's state directory, on a free loopback port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        addr = "127.0.0.1:%d" % s.getsockname()[1]
    sock = str(tmp_path / "s.sock")
    p = subprocess.Popen([trellis_bin, "--state-dir", state_dir, "serve", "--quiet", "--socket", sock, "--listen", addr],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert p.stdout is not None
    line = p.stdout.readline().decode()
    assert line.startswith("serving on tcp") or line.startswith("web page:"), line
    yield "http://" + addr
    p.send_signal(signal.SIGINT)
    p.wait(30)


def test_token(url: str, state_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(trellis.APIError) as refused:
        trellis.Client(url=url, token="").request("GET", "/networks")
    assert refused.value.status == 401 and "Bearer" in refused.value.detail
    with pytest.raises(trellis.APIError) as wrong:
        trellis.networks(client=trellis.Client(url=url, token="x" * 43))
    assert wrong.value.status == 401

    monkeypatch.delenv("TRELLIS_TOKEN", raising=False)
    monkeypatch.setenv("TRELLIS_STATE_DIR", state_dir)  # root reads the token file there
    token = trellis.read_token()
    assert token and len(token) >= 32
    assert isinstance(trellis.networks(client=trellis.Client(url=url)), list)

    monkeypatch.setenv("TRELLIS_STATE_DIR", "/nonexistent")
    monkeypatch.setenv("TRELLIS_TOKEN", token)
    monkeypatch.setenv("TRELLIS_URL", url)
    assert isinstance(trellis.networks(), list)


def test_url_sends_no_host_path(url: str, topo, monkeypatch: pytest.MonkeyPatch, state_dir: str) -> None:
    monkeypatch.setenv("TRELLIS_STATE_DIR", state_dir)
    extra = "    files: [{path: /etc/copy, source: /etc/shadow}]\n"
    path = topo("pysrc")
    with open(path) as f:
        text = f.read().replace("a: {addresses: {eth1: [10.0.0.1/24]}}", "a:\n    addresses: {eth1: [10.0.0.1/24]}\n" + extra)
    with open(path, "w") as f:
        f.write(text)
    with pytest.raises(trellis.APIError) as refused:
        trellis.up(path, client=trellis.Client(url=url))
    assert refused.value.status == 422
    assert [e.field for e in refused.value.errors] == ["nodes.a.files[0].source"]
    assert "content:" in refused.value.errors[0].fix
    assert "pysrc" not in [n["name"] for n in trellis.networks(client=trellis.Client(url=url))]
