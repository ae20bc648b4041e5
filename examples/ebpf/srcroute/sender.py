"""Sends one source-routed frame (srcroute.c's header) out of an interface.

usage: python3 sender.py IFACE PAYLOAD PORT...   (the ports in the order the hops use them)
"""
import socket
import struct
import sys

ETH_P_SRCROUTE = 0x88B5
MAX_DEPTH = 7


def frame(src_mac: bytes, path: list[int], payload: bytes) -> bytes:
    if not 1 <= len(path) <= MAX_DEPTH:
        raise SystemExit(f"sender.py: the path has {len(path)} ports; 1 to {MAX_DEPTH} fit")
    stack = list(reversed(path))  # the first hop's port on top, at ports[depth - 1]
    header = struct.pack("B7B", len(stack), *(stack + [0] * (MAX_DEPTH - len(stack))))
    return b"\xff" * 6 + src_mac + struct.pack("!H", ETH_P_SRCROUTE) + header + payload


def main() -> None:
    iface, payload, path = sys.argv[1], sys.argv[2].encode(), [int(p) for p in sys.argv[3:]]
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    s.send(frame(s.getsockname()[4], path, payload))


if __name__ == "__main__":
    main()
