#!/usr/bin/env python3
"""Opens N client connections to a proxy, makes one request on each, then
keeps them all open and idle, and prints the server's RSS rise per
connection.

    bench/idle-conns.py --port 8000 --pid PID --conns 1000 [--h2] [--path /]
        [--hold SECONDS] [--slow] [--burst]

--hold (default 2 s) is how long the connections sit idle before the RSS
is read: sluice parks a connection idle for a second (its task and
buffers go), so an idle connection is measured once it has been idle.

--h2 speaks HTTP/2 with prior knowledge (h2c), one GET on stream 1;
--slow sends only part of a request head (a slowloris) and no request.
The RSS is read from /proc/PID/status (VmRSS) before the first connection
and after the last one, with the connections still open; PID may be a
list (nginx master and worker: the figures add up). Prints one line:
`conns N rss_before_kib A rss_after_kib B per_conn_bytes C`.
"""

import argparse
import socket
import struct
import sys
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def rss_kib(pids):
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total


def frame(kind, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def h2_request(port, path):
    authority = f"127.0.0.1:{port}".encode()
    # HPACK: :method GET, :scheme http, :path (literal, not indexed), :authority.
    block = bytes([0x82, 0x86, 0x04, len(path)]) + path.encode() + bytes([0x01, len(authority)]) + authority
    return PREFACE + frame(4, 0, 0, b"") + frame(1, 0x05, 1, block)


def read_h1_answer(sock):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before the answer")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed mid-body")
        body += chunk


def read_h2_answer(sock):
    """Reads frames until stream 1 ends; acknowledges the server's SETTINGS."""
    data = b""
    while True:
        while len(data) < 9 or len(data) < 9 + int.from_bytes(data[:3], "big"):
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed before the answer")
            data += chunk
        length = int.from_bytes(data[:3], "big")
        kind, flags = data[3], data[4]
        stream = int.from_bytes(data[5:9], "big") & 0x7FFFFFFF
        data = data[9 + length:]
        if kind == 4 and not flags & 1:
            sock.sendall(frame(4, 1, 0, b""))
        if kind == 7:
            raise ConnectionError("GOAWAY")
        if stream == 1 and kind in (0, 1) and flags & 1:
            return


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pid", required=True, help="PID or comma-separated PIDs")
    parser.add_argument("--conns", type=int, default=1000)
    parser.add_argument("--h2", action="store_true")
    parser.add_argument("--slow", action="store_true")
    parser.add_argument("--path", default="/")
    parser.add_argument("--hold", type=float, default=2.0)
    parser.add_argument(
        "--burst",
        action="store_true",
        help="open every connection, then send every request, then read every answer "
        "(all requests in flight at once) instead of one connection after another",
    )
    args = parser.parse_args()
    pids = [int(p) for p in args.pid.split(",")]
    host = f"127.0.0.1:{args.port}"
    h1 = f"GET {args.path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: idle-conns\r\n\r\n".encode()
    before = rss_kib(pids)
    socks = []
    try:
        if args.burst and not args.slow:
            for _ in range(args.conns):
                sock = socket.create_connection(("127.0.0.1", args.port))
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                socks.append(sock)
            for sock in socks:
                sock.sendall(h2_request(args.port, args.path) if args.h2 else h1)
            for sock in socks:
                if args.h2:
                    read_h2_answer(sock)
                else:
                    read_h1_answer(sock)
        for _ in range(0 if args.burst and not args.slow else args.conns):
            sock = socket.create_connection(("127.0.0.1", args.port))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if args.slow:
                sock.sendall(f"GET {args.path} HTTP/1.1\r\nHost: {host}\r\nX-Slow-1: a\r\n".encode())
            elif args.h2:
                sock.sendall(h2_request(args.port, args.path))
                read_h2_answer(sock)
            else:
                sock.sendall(h1)
                read_h1_answer(sock)
            socks.append(sock)
    except OSError as err:
        print(f"failed after {len(socks)} connections: {err}", file=sys.stderr)
        return 1
    time.sleep(args.hold)
    after = rss_kib(pids)
    per_conn = (after - before) * 1024 / args.conns
    print(f"conns {args.conns} rss_before_kib {before} rss_after_kib {after} per_conn_bytes {per_conn:.0f}")
    for sock in socks:
        sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
