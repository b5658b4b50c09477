#!/usr/bin/env python3
"""The `compress` handler's memory budget under 1,000 concurrent compressed
responses (issue 47): are they within `max_memory`, and what does the
process really hold?

An upstream (asyncio, in this process) answers each request with a
chunked JSON body: one 4 KiB chunk at once, the rest only when every
response has started. COUNT clients (asyncio) each send a GET with
`Accept-Encoding: ALGORITHM` through sluice (one worker) and read until
their first body bytes arrive, so that COUNT responses are in flight at
once, each holding its compressor (or sent uncompressed, when the budget
has no room). Then the process's RSS (VmRSS), and /metrics: memory
reserved, responses compressed, responses over budget. Then all are
released and read to their end; RSS again.

    bench/compress-memory.py --sluice target/release/sluice
    bench/compress-memory.py --algorithm zstd --max-memory 64MiB --count 1000

Prints one Markdown table row per run (and the RSS of an idle proxy first).
"""

import argparse
import asyncio
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

CHUNK = (b'{"id":1,"name":"catten","tag":"cat","owner":{"city":"Lisbon"}},' * 64)[:4096]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def upstream(release, started, port):
    async def serve(reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if not head:
                    return
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"transfer-encoding: chunked\r\n\r\n"
                    + b"%x\r\n" % len(CHUNK) + CHUNK + b"\r\n"
                )
                await writer.drain()
                started[0] += 1
                await release.wait()
                for _ in range(8):
                    writer.write(b"%x\r\n" % len(CHUNK) + CHUNK + b"\r\n")
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return

    return await asyncio.start_server(serve, "127.0.0.1", port, backlog=4096)


async def client(port, algorithm, first, done, encodings):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"GET /big HTTP/1.1\r\nhost: bench\r\naccept-encoding: "
        + algorithm.encode()
        + b"\r\nconnection: close\r\n\r\n"
    )
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    encodings.append(b"content-encoding" in head.lower())
    await reader.read(1)  # the first body bytes: the compressor is at work
    first[0] += 1
    await reader.read()  # to the end (connection: close)
    done[0] += 1
    writer.close()


async def metrics(admin):
    reader, writer = await asyncio.open_connection("127.0.0.1", admin)
    writer.write(b"GET /metrics HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
    await writer.drain()
    text = (await reader.read()).decode()
    writer.close()

    def value(name):
        total = 0
        for m in re.finditer(rf"^{name}(?:{{[^}}]*}})? (\d+)$", text, re.M):
            total += int(m.group(1))
        return total

    return {
        "reserved": value("sluice_compress_memory_bytes"),
        "compressed": value("sluice_compress_responses_total"),
        "over_budget": value("sluice_compress_over_budget_total"),
    }


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sluice", default="target/release/sluice")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--algorithm", default="gzip", choices=["gzip", "br", "zstd"])
    parser.add_argument("--max-memory", default="64MiB")
    parser.add_argument("--accept", help="the clients' Accept-Encoding (default: the coding; `identity`: the same load uncompressed, the baseline)")
    args = parser.parse_args()
    accept = args.accept or args.algorithm

    up_port, proxy_port, admin_port = free_port(), free_port(), free_port()
    release, started = asyncio.Event(), [0]
    server = await upstream(release, started, up_port)
    config = f"""workers: 1
listeners: [{{ address: 127.0.0.1:{proxy_port} }}]
admin: {{ address: 127.0.0.1:{admin_port} }}
limits: {{ max_connections: {args.count * 4} }}
upstreams: {{ up: {{ hosts: ["http://127.0.0.1:{up_port}"], pool: {{ max_idle: {args.count} }} }} }}
middleware: {{ squeeze: {{ compress: {{ algorithms: [{args.algorithm}], max_memory: {args.max_memory} }} }} }}
routes: [{{ path: /, chain: [squeeze], upstream: up }}]
"""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(config)
    proxy = subprocess.Popen([args.sluice, "proxy", "-c", f.name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", proxy_port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        # One response first, so that the worker's buffers and pools exist.
        warm_first, warm_done = [0], [0]
        warm = asyncio.create_task(client(proxy_port, accept, warm_first, warm_done, []))
        while warm_first[0] < 1:
            await asyncio.sleep(0.01)
        release.set()
        await warm
        release.clear()
        idle = rss_kib(proxy.pid)

        first, done, encodings = [0], [0], []
        tasks = [
            asyncio.create_task(client(proxy_port, accept, first, done, encodings))
            for _ in range(args.count)
        ]
        deadline = time.time() + 60
        while first[0] < args.count and time.time() < deadline:
            await asyncio.sleep(0.05)
        held = rss_kib(proxy.pid)
        seen = await metrics(admin_port)
        release.set()
        await asyncio.gather(*tasks)
        after = rss_kib(proxy.pid)
        end = await metrics(admin_port)
        in_flight = first[0]
        compressed = sum(encodings)
        print(
            f"| {accept} | {args.max_memory} | {in_flight} | {compressed} | {in_flight - compressed} "
            f"| {seen['over_budget']} | {seen['reserved'] / 2**20:.1f} MiB | {idle / 1024:.1f} MiB "
            f"| {held / 1024:.1f} MiB | {(held - idle) / 1024:.1f} MiB | {after / 1024:.1f} MiB "
            f"| {end['reserved']} |"
        )
    finally:
        proxy.terminate()
        proxy.wait()
        server.close()
        os.unlink(f.name)


if __name__ == "__main__":
    print(
        "| coding | max_memory | responses in flight | compressed | uncompressed | counted over budget "
        "| reserved at peak | RSS idle | RSS with all in flight | rise | RSS after | reserved after |",
        file=sys.stderr,
    )
    asyncio.run(main())
