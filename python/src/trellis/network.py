"""A running network and its nodes and links, Mininet style."""

from __future__ import annotations

import os
import urllib.parse
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from .client import Client
from .tables import APITables, Table

__all__ = ["Network", "Node", "Link", "ExecResult", "Change", "CommandError"]

Counters = Dict[str, int]


def _q(name: str) -> str:
    return urllib.parse.quote(name, safe="")


@dataclass(frozen=True)
class ExecResult:
    """How a command run in a node ended and what it wrote."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class CommandError(Exception):
    """A command run with check=True failed."""

    def __init__(self, node: str, argv: Sequence[str], result: ExecResult):
        self.node, self.argv, self.result = node, list(argv), result
        why = "timed out" if result.timed_out else f"exited {result.exit_code}"
        super().__init__(f"{node}: {' '.join(argv)}: {why}: {result.stderr.strip()}")


@dataclass(frozen=True)
class Change:
    """One difference ``up`` of a file would make (or made), as ``trellis diff`` shows it."""

    op: str  # add, remove, change or restart
    object: str  # node or link
    name: str
    what: Tuple[str, ...] = ()

    def __str__(self) -> str:
        sign = {"add": "+", "remove": "-", "change": "~", "restart": "!"}.get(self.op, "?")
        s = f"{sign} {self.object} {self.name}" + (" (restarts)" if self.op == "restart" else "")
        return s + (": " + "; ".join(self.what) if self.what else "")

    @classmethod
    def of(cls, d: Mapping[str, Any]) -> "Change":
        return cls(d["op"], d["object"], d["name"], tuple(d.get("what") or ()))


class Node:
    """A node of a network: ``node.cmd("ip route")`` runs a command in it."""

    def __init__(self, net: "Network", name: str):
        self.net, self.name = net, name

    def __repr__(self) -> str:
        return f"<Node {self.net.name}/{self.name}>"

    def run(
        self, cmd: Union[str, Sequence[str]], *, stdin: Optional[str] = None, timeout: Optional[float] = None
    ) -> ExecResult:
        """Run a command in the node and return how it ended. A string runs under
        ``/bin/sh -c``; a list is the argv itself. ``timeout`` (seconds, default 60) kills it."""
        argv = ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        body: Dict[str, Any] = {"argv": argv}
        if stdin is not None:
            body["stdin"] = stdin
        if timeout is not None:
            body["timeout"] = timeout
        r = self.net.client.request("POST", f"/networks/{_q(self.net.name)}/nodes/{_q(self.name)}/exec", body)
        return ExecResult(
            r["exit_code"], r["stdout"], r["stderr"], r.get("timed_out", False), r.get("truncated", False), r.get("seconds", 0.0)
        )

    def cmd(
        self,
        cmd: Union[str, Sequence[str]],
        *,
        stdin: Optional[str] = None,
        timeout: Optional[float] = None,
        check: bool = False,
    ) -> str:
        """Run a command in the node and return its output (stdout, then stderr), as
        Mininet's ``node.cmd`` does. With ``check``, a failure raises CommandError."""
        r = self.run(cmd, stdin=stdin, timeout=timeout)
        if check and not r.ok:
            raise CommandError(self.name, ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else cmd, r)
        return r.stdout + r.stderr

    def tables(self) -> List[Dict[str, Any]]:
        """The tables of the node's dataplane program (``trellis table NET NODE``): name, type,
        key_size, value_size, max_entries, read_only."""
        return APITables(self.net.client, self.net.name, self.name).tables()

    def table(self, name: str) -> Table:
        """The table ``name`` of the node's dataplane program: ``get``, ``set``, ``delete``,
        ``dump``, with keys and values as bytes or hex (docs/ebpf-nodes.md)."""
        return APITables(self.net.client, self.net.name, self.name).table(name)

    def info(self) -> Dict[str, Any]:
        """The node as inspect shows it: pid, running, interfaces with addresses."""
        for n in self.net.inspect()["nodes"]:
            if n["name"] == self.name:
                return dict(n)
        raise KeyError(self.name)


class Link:
    """A link of a network: take it down and up, impair it, read its counters."""

    def __init__(self, net: "Network", name: str, endpoints: Sequence[str]):
        self.net, self.name, self.endpoints = net, name, tuple(endpoints)

    def __repr__(self) -> str:
        return f"<Link {self.net.name}/{self.name} {' '.join(self.endpoints)}>"

    def _path(self, what: str) -> str:
        return f"/networks/{_q(self.net.name)}/links/{_q(self.name)}/{what}"

    def down(self, endpoint: Optional[str] = None) -> None:
        """Take the link's carrier away (the nodes see NO-CARRIER), or one endpoint's."""
        self._state("down", endpoint)

    def up(self, endpoint: Optional[str] = None) -> None:
        """Give the link's carrier back, or one endpoint's."""
        self._state("up", endpoint)

    def _state(self, state: str, endpoint: Optional[str]) -> None:
        body = {"state": state}
        if endpoint:
            body["endpoint"] = endpoint
        self.net.client.request("PUT", self._path("state"), body)

    def set(
        self,
        loss: float = 0,
        duplicate: float = 0,
        corrupt: float = 0,
        *,
        correlation: float = 0,
        delay: Optional[str] = None,
        jitter: Optional[str] = None,
        distribution: Optional[str] = None,
        endpoint: Optional[str] = None,
    ) -> None:
        """Set the link's impairments live, in percent: ``link.set(loss=5)``, and delay and
        jitter as a topology file writes them: ``link.set(delay="10ms", jitter="2ms",
        distribution="normal")``. They replace the link's in both directions (what is not
        given is 0; ``link.set()`` removes them), or with ``endpoint="r1:eth1"`` those of the
        frames that endpoint sends."""
        body: Dict[str, Any] = {"loss": loss, "loss_correlation": correlation, "duplicate": duplicate, "corrupt": corrupt}
        for key, value in (("delay", delay), ("jitter", jitter), ("distribution", distribution)):
            if value:
                body[key] = value
        if endpoint:
            body["endpoint"] = endpoint
        self.net.client.request("PUT", self._path("impairments"), body)

    def info(self) -> Dict[str, Any]:
        """The link as inspect shows it: connector, rate, state, endpoints with counters."""
        for link in self.net.inspect()["links"]:
            if link["name"] == self.name:
                return dict(link)
        raise KeyError(self.name)

    def counters(self) -> Dict[str, Counters]:
        """Each endpoint's counters, by "NODE:IF": tx/rx packets and bytes, shaper drops,
        and for an impaired link what the impairment did."""
        return _endpoint_counters(self.info())


_COUNTERS = ("tx_packets", "tx_bytes", "rx_packets", "rx_bytes", "drops", "impair_drops", "duplicated", "corrupted")


def _endpoint_counters(link: Mapping[str, Any]) -> Dict[str, Counters]:
    return {f"{e['node']}:{e['interface']}": {k: int(e.get(k, 0)) for k in _COUNTERS} for e in link["endpoints"]}


class _Names(Mapping[Any, Any]):
    """A read-only mapping of a network's nodes or links by name; links are also found by
    ``"r1-r2"`` or ``("r1", "r2")`` when one link joins the two nodes."""

    def __init__(self, by_name: Optional[Dict[str, Any]] = None, kind: str = "node"):
        self._by_name = by_name or {}
        self._kind = kind

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str) and key in self._by_name:
            return self._by_name[key]
        pair = tuple(key) if isinstance(key, tuple) else tuple(key.split("-", 1)) if isinstance(key, str) else ()
        if self._kind == "link" and len(pair) == 2:
            found = [l for l in self._by_name.values() if {e.split(":")[0] for e in l.endpoints} == set(pair)]
            if len(found) == 1:
                return found[0]
        raise KeyError(f"no {self._kind} {key!r}; there are: {', '.join(sorted(self._by_name))}")

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)


class Network:
    """A network of a ``trellis serve``. ``trellis.up(file)`` makes one; as a context
    manager it removes the network (and stops a server it started) on exit."""

    def __init__(self, client: Client, name: str, *, on_exit: Optional[Any] = None):
        self.client, self.name = client, name
        self.nodes: Mapping[Any, Node] = _Names(kind="node")
        self.links: Mapping[Any, Link] = _Names(kind="link")
        self._on_exit = on_exit
        self.refresh()

    def __repr__(self) -> str:
        return f"<Network {self.name}: {len(self.nodes)} nodes, {len(self.links)} links>"

    def __enter__(self) -> "Network":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._on_exit is not None:
            self._on_exit(self)

    def refresh(self) -> Dict[str, Any]:
        """Read the network again (its nodes and links may have changed); return inspect's view."""
        info = self.inspect()
        self.nodes = _Names({n["name"]: Node(self, n["name"]) for n in info["nodes"]}, "node")
        self.links = _Names(
            {l["name"]: Link(self, l["name"], [f"{e['node']}:{e['interface']}" for e in l["endpoints"]]) for l in info["links"]},
            "link",
        )
        return info

    def inspect(self) -> Dict[str, Any]:
        """Nodes, interfaces, links and counters, read live (``trellis inspect --json``)."""
        info: Dict[str, Any] = self.client.request("GET", f"/networks/{_q(self.name)}")
        return info

    def counters(self) -> Dict[str, Dict[str, Counters]]:
        """Every link's endpoints' counters: ``{link: {"NODE:IF": {"tx_packets": ...}}}``."""
        return {l["name"]: _endpoint_counters(l) for l in self.inspect()["links"]}

    def apply(self, file: str, *, host: Optional[str] = None) -> List[Change]:
        """Change the network live to match ``file`` (``trellis up FILE``); return what changed."""
        res = _post_file(self.client, "/networks", file, host)
        if res["network"] != self.name:
            raise ValueError(f"{file} is network {res['network']}, not {self.name}")
        self.refresh()
        return [Change.of(c) for c in res["changes"]]

    def diff(self, file: str, *, host: Optional[str] = None) -> List[Change]:
        """What ``apply(file)`` would change, changing nothing (``trellis diff FILE``)."""
        return [Change.of(c) for c in _post_file(self.client, "/diff", file, host)["changes"]]

    def capture(
        self,
        link: str,
        *,
        count: Optional[int] = None,
        endpoint: Optional[str] = None,
        filter: Optional[str] = None,
        file: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> bytes:
        """Capture a link's frames in both directions as pcapng (``trellis capture``):
        ``count`` frames (or until ``timeout`` seconds), of one ``endpoint`` or all, matching
        a tcpdump ``filter``; written to ``file`` if given. Returns the pcapng bytes."""
        try:
            name = self.links[link].name  # "r1-r2" or ("r1", "r2") found as in net.links
        except KeyError:
            name = link  # the server says what is wrong with it
        data: bytes = self.client.request(
            "GET",
            f"/networks/{_q(self.name)}/links/{_q(name)}/capture",
            query={"count": count, "endpoint": endpoint, "filter": filter},
            timeout=timeout,
            raw=True,
        )
        if file:
            with open(file, "wb") as f:
                f.write(data)
        return data

    def down(self) -> None:
        """Remove the network (``trellis down``)."""
        self.client.request("DELETE", f"/networks/{_q(self.name)}")


def _post_file(client: Client, path: str, file: str, host: Optional[str]) -> Dict[str, Any]:
    with open(file, "rb") as f:
        body = f.read()
    # The absolute path: the server reads relative `source:` paths relative to it.
    res: Dict[str, Any] = client.request(
        "POST", path, body, query={"file": os.path.abspath(file), "host": host}, content_type="application/yaml"
    )
    return res
