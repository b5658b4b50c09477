#!/usr/bin/env python3
"""A bidi gRPC ping-pong through a running proxy (issue 16, full duplex).

A manual check with a real gRPC stack (grpcio), not a CI test. Needs
`pip install grpcio grpcio-tools`; the stubs are generated from
bench/grpc/echo.proto into a temporary directory at each run.

    # an echo server (h2c) on port 50051
    bench/grpc-bidi.py serve --port 50051 &
    # a proxy in front of it: `protocol: h2c`, a listener on 8080
    sluice proxy -c proxy.yaml &
    # ten messages 50 ms apart on one stream, directly, then through the proxy
    bench/grpc-bidi.py ping --target 127.0.0.1:50051
    bench/grpc-bidi.py ping --target 127.0.0.1:8080

The client sends on its own clock (messages PAUSE apart, whatever comes
back), so a proxy that holds replies until the request ends is measured
too: its first reply comes after the last message. It prints the time
from each message to its echo, and whether every echo came back before
the next message went out (interleaved).
"""

import argparse
import importlib
import queue
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc

PROTO_DIR = Path(__file__).resolve().parent / "grpc"


def load_stubs():
    """Generates echo_pb2 and echo_pb2_grpc from the proto and imports them."""
    out = tempfile.mkdtemp(prefix="sluice-grpc-")
    subprocess.run(
        [
            sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO_DIR}",
            f"--python_out={out}", f"--grpc_python_out={out}", "echo.proto",
        ],
        check=True,
    )
    sys.path.insert(0, out)
    return importlib.import_module("echo_pb2"), importlib.import_module("echo_pb2_grpc")


def serve(args):
    pb2, pb2_grpc = load_stubs()

    class Echo(pb2_grpc.EchoServicer):
        def Chat(self, request_iterator, context):
            for ping in request_iterator:
                yield ping

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    pb2_grpc.add_EchoServicer_to_server(Echo(), server)
    server.add_insecure_port(f"127.0.0.1:{args.port}")
    server.start()
    print(f"echo server on 127.0.0.1:{args.port}", flush=True)
    server.wait_for_termination()


def ping(args):
    pb2, pb2_grpc = load_stubs()
    channel = grpc.insecure_channel(args.target)
    grpc.channel_ready_future(channel).result(timeout=5)
    stub = pb2_grpc.EchoStub(channel)
    sent_at = [None] * args.messages

    def pings():
        for seq in range(args.messages):
            if seq:
                time.sleep(args.pause)
            sent_at[seq] = time.perf_counter()
            yield pb2.Ping(seq=seq, payload=b"x" * args.size)

    start = time.perf_counter()
    replies = []
    call = stub.Chat(pings(), timeout=args.timeout)
    for reply in call:
        replies.append((reply.seq, time.perf_counter()))
    status = call.code()
    if len(replies) != args.messages:
        sys.exit(f"{len(replies)} replies to {args.messages} messages ({status})")
    round_trips = [(at - sent_at[seq]) * 1000 for seq, at in replies]
    interleaved = all(
        at < sent_at[seq + 1] for seq, at in replies if seq + 1 < args.messages
    )
    print(f"target {args.target}: {args.messages} messages {args.pause * 1000:.0f} ms apart, status {status.name}")
    print(f"first reply {round_trips[0]:.2f} ms after the first message "
          f"({(replies[0][1] - start) * 1000:.2f} ms after the call began)")
    print("round trips (ms): " + " ".join(f"{rt:.2f}" for rt in round_trips))
    ordered = sorted(round_trips)
    print(f"median {ordered[len(ordered) // 2]:.2f} ms, max {ordered[-1]:.2f} ms; "
          f"interleaved: {'yes' if interleaved else 'NO'}")
    return 0 if interleaved else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    server = commands.add_parser("serve", help="run the echo server (h2c)")
    server.add_argument("--port", type=int, default=50051)
    client = commands.add_parser("ping", help="run the ping-pong against TARGET")
    client.add_argument("--target", required=True, help="host:port (h2c)")
    client.add_argument("--messages", type=int, default=10)
    client.add_argument("--pause", type=float, default=0.05, help="seconds between messages")
    client.add_argument("--size", type=int, default=16, help="payload bytes per message")
    client.add_argument("--timeout", type=float, default=10.0, help="seconds for the whole call")
    args = parser.parse_args()
    if args.command == "serve":
        serve(args)
    else:
        sys.exit(ping(args))


if __name__ == "__main__":
    main()
