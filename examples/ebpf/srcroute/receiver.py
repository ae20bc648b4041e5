"""Prints each source-routed frame (srcroute.c's header) that comes to one of this node's
interfaces: the interface, the stack's depth left, the payload. Prints "ready" first and
exits after COUNT frames.

usage: python3 receiver.py COUNT
"""
import select
import socket
import sys

ETH_P_SRCROUTE = 0x88B5


def main() -> None:
    count = int(sys.argv[1])
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_SRCROUTE))
    print("ready", flush=True)
    while count > 0:
        select.select([s], [], [])
        data, addr = s.recvfrom(2048)
        if addr[2] == socket.PACKET_OUTGOING:
            continue
        print(addr[0], data[14], data[22:].rstrip(b"\0").decode(errors="replace"), flush=True)
        count -= 1


if __name__ == "__main__":
    main()
