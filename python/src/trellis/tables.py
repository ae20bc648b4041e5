"""The tables (maps) of a node's dataplane program (docs/ebpf-nodes.md): from outside, through
``trellis serve`` (``net.nodes["s1"].table("routes")``), and from a process inside the node,
through the table socket trellis gives it (``NodeTables()``). Keys and values are ``bytes`` in
memory order, or the same written in hex (``"0a000201"``, ``"0a:00:02:01"``), exactly as long
as the table's. This module needs only the standard library: copy it into a node to use
``NodeTables`` there."""

from __future__ import annotations

import json
import socket
import urllib.parse
from typing import Any, Dict, List, Optional, Union

__all__ = ["Table", "NodeTables", "TableError", "SOCKET"]

Bytes = Union[bytes, bytearray, str]

SOCKET = "\0trellis/tables"
"""The table socket in a programmable node: the abstract unix socket ``@trellis/tables``."""


class TableError(Exception):
    """A table operation the table socket refused (an unknown table, a key of the wrong
    size, a write to trellis's own table, ...); nothing was changed."""


def _hex(v: Bytes) -> str:
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    if isinstance(v, str):
        return v
    raise TypeError(f"a key or value is bytes or a hex string, not {type(v).__name__}")


def _q(name: str) -> str:
    return urllib.parse.quote(name, safe="")


class Table:
    """One table of a node's program: ``get``, ``set``, ``delete``, ``dump``; also
    ``table[key]``, ``table[key] = value``, ``del table[key]``, ``key in table``."""

    def __init__(self, backend: Any, name: str):
        self._b, self.name = backend, name

    def __repr__(self) -> str:
        return f"<Table {self.name}>"

    def get(self, key: Bytes, default: Optional[bytes] = None) -> Optional[bytes]:
        """The value of ``key``, or ``default`` if the table has no such key."""
        try:
            return self[key]
        except KeyError:
            return default

    def set(self, key: Bytes, value: Bytes) -> None:
        """Write ``key``'s value; the program sees it at once."""
        self._b._do("set", self.name, _hex(key), _hex(value))

    def delete(self, key: Bytes) -> None:
        """Remove ``key``; KeyError if the table has no such key."""
        self._b._do("del", self.name, _hex(key))

    def dump(self) -> Dict[bytes, bytes]:
        """Every entry of the table."""
        r = self._b._do("dump", self.name)
        return {bytes.fromhex(e["key"]): bytes.fromhex(e["value"]) for e in r.get("entries") or []}

    def __getitem__(self, key: Bytes) -> bytes:
        return bytes.fromhex(self._b._do("get", self.name, _hex(key))["value"])

    def __setitem__(self, key: Bytes, value: Bytes) -> None:
        self.set(key, value)

    def __delitem__(self, key: Bytes) -> None:
        self.delete(key)

    def __contains__(self, key: object) -> bool:
        return self.get(key) is not None  # type: ignore[arg-type]


class _Tables:
    """What the API's and the socket's clients share: ``tables()`` and ``table(name)``."""

    def _do(self, op: str, table: str = "", key: str = "", value: str = "") -> Dict[str, Any]:
        raise NotImplementedError

    def tables(self) -> List[Dict[str, Any]]:
        """The program's tables: name, type, key_size, value_size, max_entries, read_only."""
        return list(self._do("tables").get("tables") or [])

    def table(self, name: str) -> Table:
        """The table ``name`` (an unknown name is refused at its first use, naming those there are)."""
        return Table(self, name)


class APITables(_Tables):
    """The tables of a node, through ``trellis serve`` (``Node.tables()``, ``Node.table()``)."""

    def __init__(self, client: Any, network: str, node: str):
        self._client, self._base = client, f"/networks/{_q(network)}/nodes/{_q(node)}/tables"

    def _do(self, op: str, table: str = "", key: str = "", value: str = "") -> Dict[str, Any]:
        from .client import APIError

        path = self._base + (f"/{_q(table)}" if table else "") + (f"/entries/{_q(key)}" if key else "")
        method, body = {"tables": ("GET", None), "dump": ("GET", None), "get": ("GET", None),
                        "set": ("PUT", {"value": value}), "del": ("DELETE", None)}[op]
        try:
            return self._client.request(method, path, body) or {}
        except APIError as e:
            if e.status == 404 and "no entry" in e.detail:
                raise KeyError(key) from e
            raise


class NodeTables(_Tables):
    """The tables of the node this process runs in, through its table socket (the P4Runtime
    role; docs/ebpf-nodes.md): for a controller inside a programmable node, run by the node's
    root. ``NodeTables().table("routes").set(key, value)``. One connection, kept open; use it
    from one thread at a time (or as a context manager, which closes it)."""

    def __init__(self, path: str = SOCKET, timeout: Optional[float] = 10.0):
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        self._sock.connect(path)
        self._file = self._sock.makefile("rb")

    def close(self) -> None:
        self._file.close()
        self._sock.close()

    def __enter__(self) -> "NodeTables":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _do(self, op: str, table: str = "", key: str = "", value: str = "") -> Dict[str, Any]:
        req = {k: v for k, v in (("op", op), ("table", table), ("key", key), ("value", value)) if v}
        self._sock.sendall(json.dumps(req).encode() + b"\n")
        line = self._file.readline()
        if not line:
            raise ConnectionError("the table socket closed the connection")
        r = json.loads(line)
        if not r.get("ok"):
            err = r.get("error", "")
            if "no entry" in err:
                raise KeyError(key)
            raise TableError(err)
        return dict(r)
