"""Trellis from Python: virtual networks of ``trellis serve``, Mininet style.

>>> import trellis
>>> with trellis.up("examples/ospf-ring/ring.yaml") as net:       # doctest: +SKIP
...     print(net.nodes["r1"].cmd("ip route"))
...     net.links["r1-r2"].down()
...     net.links["r2-r3"].set(loss=5)
...     print(net.counters()["r2-r3"])

``up`` uses the server of the state directory (its unix socket), or starts one for the
duration of the ``with`` block; see docs/python.md.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

from .client import DEFAULT_STATE_DIR, APIError, Client, ProblemDetail, read_token
from .network import Change, CommandError, ExecResult, Link, Network, Node, _post_file
from .server import Server, find_binary
from .tables import NodeTables, Table, TableError

__all__ = [
    "up",
    "connect",
    "networks",
    "Client",
    "Network",
    "Node",
    "Link",
    "Change",
    "ExecResult",
    "APIError",
    "ProblemDetail",
    "CommandError",
    "Table",
    "NodeTables",
    "TableError",
    "Server",
    "find_binary",
    "DEFAULT_STATE_DIR",
    "read_token",
]

__version__ = "0.1.0"


def up(
    file: str,
    *,
    client: Optional[Client] = None,
    state_dir: Optional[str] = None,
    host: Optional[str] = None,
    keep: bool = False,
    serve: bool = True,
) -> Network:
    """Bring up the network of topology file ``file`` (or change it live to match, if it
    is up) and return it. Used as a context manager, the network is removed on exit unless
    ``keep``. Without ``client``, the server of ``state_dir`` ($TRELLIS_STATE_DIR,
    /var/lib/trellis) is used ($TRELLIS_URL or $TRELLIS_SOCKET name another); if none
    answers and ``serve``, one is started (the trellis binary: $TRELLIS_BIN or PATH) and
    stopped on exit."""
    server: Optional[Server] = None
    if client is None:
        client = Client.default(state_dir)
        if not client.alive():
            if not serve or client.url:
                raise ConnectionError(f"no trellis serve answers at {client.url or client.socket}")
            sd = state_dir or os.environ.get("TRELLIS_STATE_DIR") or DEFAULT_STATE_DIR
            server = Server(sd, socket=client.socket)
            client = server.start()
    try:
        res = _post_file(client, "/networks", file, host)
    except BaseException:
        if server:
            server.stop()
        raise

    def on_exit(net: Network) -> None:
        try:
            if not keep:
                net.down()
        finally:
            if server:
                server.stop()

    try:
        return Network(client, res["network"], on_exit=on_exit)
    except BaseException:
        if server:
            server.stop()
        raise


def connect(name: str, *, client: Optional[Client] = None, state_dir: Optional[str] = None) -> Network:
    """The network ``name`` that is up already (nothing happens to it on exit)."""
    return Network(client or Client.default(state_dir), name)


def networks(*, client: Optional[Client] = None, state_dir: Optional[str] = None) -> List[Dict[str, Any]]:
    """The networks of the server, as ``trellis ls`` lists them (dicts)."""
    c = client or Client.default(state_dir)
    return list(c.request("GET", "/networks")["networks"])
