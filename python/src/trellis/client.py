"""HTTP transport to ``trellis serve``: its unix socket, or a loopback address with the server's
token; standard library only."""

from __future__ import annotations

import http.client
import json
import os
import socket
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Union

__all__ = ["Client", "APIError", "ProblemDetail", "DEFAULT_STATE_DIR", "read_token"]

#: Where trellis keeps its networks unless told otherwise (``trellis --state-dir``).
DEFAULT_STATE_DIR = "/var/lib/trellis"


@dataclass(frozen=True)
class ProblemDetail:
    """One problem of an error response: in a topology file (file, line, field, fix, as the
    CLI prints them) or in the request (location and value)."""

    message: str
    location: str = ""
    value: Any = None
    file: str = ""
    line: int = 0
    field: str = ""
    fix: str = ""

    def __str__(self) -> str:
        if self.file:
            where = f"{self.file}:{self.line}: " if self.line else f"{self.file}: "
            text = f"{where}{self.field}: {self.message}" if self.field else f"{where}{self.message}"
            return f"{text}; {self.fix}" if self.fix else text
        if self.location:
            return f"{self.location}: {self.message}"
        return self.message


class APIError(Exception):
    """An error response of the API (an RFC 9457 problem): its HTTP status, what went wrong,
    and each problem found, e.g. every problem of a topology file with its line."""

    def __init__(self, status: int, title: str, detail: str, errors: List[ProblemDetail]):
        self.status = status
        self.title = title
        self.detail = detail
        self.errors = errors
        lines = [f"{status} {title}: {detail}"] + [f"  {e}" for e in errors]
        super().__init__("\n".join(lines))


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: Optional[float]):
        super().__init__("trellis", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if self.timeout is not None:
            s.settimeout(self.timeout)
        s.connect(self._path)
        self.sock = s


Body = Union[bytes, str, Mapping[str, Any], None]


def _state_dir(state_dir: Optional[str] = None) -> str:
    return state_dir or os.environ.get("TRELLIS_STATE_DIR") or DEFAULT_STATE_DIR


def read_token(state_dir: Optional[str] = None) -> Optional[str]:
    """The token of ``trellis serve --listen`` for a client of its URL: $TRELLIS_TOKEN, else
    the token file ($TRELLIS_TOKEN_FILE, else ``api-token`` in the state directory), which
    only root may read; None if there is neither."""
    if os.environ.get("TRELLIS_TOKEN"):
        return os.environ["TRELLIS_TOKEN"].strip()
    path = os.environ.get("TRELLIS_TOKEN_FILE") or os.path.join(_state_dir(state_dir), "api-token")
    try:
        with open(path) as f:
            return f.read().strip() or None
    except OSError:
        return None


@dataclass
class Client:
    """A client of one ``trellis serve``: by its unix socket (``socket``, root only) or by a
    loopback URL (``url``, e.g. ``http://127.0.0.1:8080``) with the server's ``token``
    (default: ``read_token()``, $TRELLIS_TOKEN or the token file). ``timeout`` bounds each
    request, in seconds (None: no bound; ups of large networks take minutes)."""

    socket: Optional[str] = None
    url: Optional[str] = None
    timeout: Optional[float] = None
    token: Optional[str] = field(default=None, repr=False)
    _hostport: str = field(default="", init=False, repr=False)

    def __post_init__(self) -> None:
        if self.url:
            u = urllib.parse.urlsplit(self.url)
            if u.scheme != "http" or not u.hostname:
                raise ValueError(f"url {self.url!r}: give http://HOST:PORT")
            self._hostport = u.netloc
            if self.token is None:
                self.token = read_token()
        elif not self.socket:
            raise ValueError("give the server's unix socket or its url")

    @classmethod
    def default(cls, state_dir: Optional[str] = None) -> "Client":
        """The client of the server named by $TRELLIS_URL (with the token of
        ``read_token(state_dir)``), else $TRELLIS_SOCKET, else the socket of state directory
        ``state_dir`` ($TRELLIS_STATE_DIR, /var/lib/trellis)."""
        if os.environ.get("TRELLIS_URL"):
            return cls(url=os.environ["TRELLIS_URL"], token=read_token(state_dir))
        if os.environ.get("TRELLIS_SOCKET"):
            return cls(socket=os.environ["TRELLIS_SOCKET"])
        return cls(socket=os.path.join(_state_dir(state_dir), "trellis.sock"))

    def _connection(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        if self.url:
            return http.client.HTTPConnection(self._hostport, timeout=timeout)
        assert self.socket is not None
        return _UnixConnection(self.socket, timeout)

    def alive(self) -> bool:
        """Whether a server answers (an error answer, such as 401 without the token, is one)."""
        try:
            self.request("GET", "/networks", timeout=2)
        except APIError:
            pass
        except (OSError, http.client.HTTPException):
            return False
        return True

    def request(
        self,
        method: str,
        path: str,
        body: Body = None,
        *,
        query: Optional[Mapping[str, Any]] = None,
        content_type: str = "application/json",
        timeout: Optional[float] = None,
        raw: bool = False,
    ) -> Any:
        """Send one request; return the decoded JSON answer (None for 204), or with ``raw``
        the body's bytes. An error status raises APIError."""
        if query:
            q = {k: v for k, v in query.items() if v is not None and v is not False}
            if q:
                path += "?" + urllib.parse.urlencode(q, doseq=True)
        data: Optional[bytes]
        if body is None:
            data = None
        elif isinstance(body, bytes):
            data = body
        elif isinstance(body, str):
            data = body.encode()
        else:
            data = json.dumps(body).encode()
        headers = {"Content-Type": content_type} if data is not None else {}
        if self.url and self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        conn = self._connection(timeout if timeout is not None else self.timeout)
        try:
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            payload = resp.read()
        finally:
            conn.close()
        if resp.status >= 400:
            raise _error(resp.status, resp.reason, resp.getheader("Content-Type", ""), payload)
        if raw:
            return payload
        if resp.status == 204 or not payload:
            return None
        return json.loads(payload)


def _error(status: int, reason: str, ctype: str, payload: bytes) -> APIError:
    if "json" in ctype:
        try:
            p: Dict[str, Any] = json.loads(payload)
            errs = [
                ProblemDetail(
                    message=e.get("message", ""),
                    location=e.get("location", ""),
                    value=e.get("value"),
                    file=e.get("file", ""),
                    line=e.get("line", 0),
                    field=e.get("field", ""),
                    fix=e.get("fix", ""),
                )
                for e in p.get("errors") or []
            ]
            return APIError(p.get("status", status), p.get("title", reason), p.get("detail", ""), errs)
        except ValueError:
            pass
    return APIError(status, reason, payload.decode(errors="replace").strip(), [])
