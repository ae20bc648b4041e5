"""Starting and stopping a ``trellis serve`` for a script that finds none running."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from typing import IO, List, Optional

from .client import Client

__all__ = ["Server", "find_binary"]


def find_binary() -> str:
    """The trellis binary: $TRELLIS_BIN, else ``trellis`` on PATH."""
    path = os.environ.get("TRELLIS_BIN") or shutil.which("trellis")
    if not path:
        raise FileNotFoundError("no trellis binary: put trellis on PATH or set TRELLIS_BIN")
    return path


class Server:
    """A ``trellis serve`` started by this process on the socket of a state directory. It
    runs as this process's user: trellis needs root."""

    def __init__(self, state_dir: str, binary: Optional[str] = None, socket: Optional[str] = None):
        self.state_dir = state_dir
        self.socket = socket or os.path.join(state_dir, "trellis.sock")
        self.binary = binary or find_binary()
        self.process: Optional["subprocess.Popen[bytes]"] = None
        self._log: IO[bytes] = tempfile.TemporaryFile()  # a file, not a pipe: nothing blocks if no one reads it

    def start(self, wait: float = 15.0) -> Client:
        """Start the server and return a client once it answers (within ``wait`` seconds)."""
        args: List[str] = [self.binary, "--state-dir", self.state_dir, "serve", "--quiet", "--socket", self.socket]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self._log)
        client = Client(socket=self.socket)
        deadline = time.monotonic() + wait
        while not client.alive():
            if self.process.poll() is not None:
                self._log.seek(0)
                err = self._log.read().decode(errors="replace")
                raise RuntimeError(f"trellis serve exited ({self.process.returncode}): {err.strip()}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"trellis serve did not answer on {self.socket} within {wait:g}s")
            time.sleep(0.05)
        return client

    def stop(self, wait: float = 30.0) -> None:
        """Stop the server as Ctrl-C does (a change under way stops cleanly)."""
        p = self.process
        if p is None or p.poll() is not None:
            return
        p.send_signal(signal.SIGINT)
        try:
            p.wait(wait)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        self._log.close()
