#!/usr/bin/env python3
"""Compressed answers from sluice, read without decoding by real HTTP
clients and decoded by Python's own decoders (gzip from the standard
library, brotli and zstandard from PyPI): HTTP/1.1 and HTTP/2 by niquests
(the other protocols disabled), HTTP/3 by aioquic's H3Connection (the
client of h3_clients.py). Run by crates/proxy/tests/it/compress/clients.rs.

Usage: compress_clients.py HOST:PORT CA_FILE PATH...; prints one JSON
object: {protocol: {path: {status, encoding, vary, sha256, length}}}.
"""

import asyncio
import gzip
import hashlib
import json
import os
import sys

import brotli
import zstandard

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h3_clients import Client  # noqa: E402

from aioquic.asyncio.client import connect  # noqa: E402
from aioquic.h3.connection import H3_ALPN  # noqa: E402
from aioquic.quic.configuration import QuicConfiguration  # noqa: E402


def decode(encoding, raw):
    if encoding == "gzip":
        return gzip.decompress(raw)
    if encoding == "br":
        return brotli.decompress(raw)
    if encoding == "zstd":
        # A streamed frame says no content size: read it as a stream.
        return zstandard.ZstdDecompressor().decompressobj().decompress(raw)
    return raw


def summary(status, headers, raw):
    encoding = headers.get("content-encoding", "")
    body = decode(encoding, raw)
    return {
        "status": status,
        "encoding": encoding,
        "vary": headers.get("vary", ""),
        "sha256": hashlib.sha256(body).hexdigest(),
        "length": len(body),
        "wire": len(raw),
    }


def coding_of(path):
    # /UPSTREAM/CODING/WHAT: the coding the route's handler offers.
    return path.split("/")[2]


def with_niquests(host, port, ca, paths, http2):
    import niquests

    session = niquests.Session(
        disable_http1=http2, disable_http2=not http2, disable_http3=True
    )
    out = {}
    for path in paths:
        response = session.get(
            f"https://{host}:{port}{path}",
            headers={"Accept-Encoding": coding_of(path)},
            verify=ca,
            timeout=10,
            stream=True,
        )
        raw = response.raw.read(decode_content=False)
        headers = {k.lower(): v for k, v in response.headers.items()}
        entry = summary(response.status_code, headers, raw)
        entry["version"] = response.raw.version
        out[path] = entry
    return out


async def with_aioquic(host, port, ca, paths):
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name="localhost")
    config.load_verify_locations(ca)
    out = {}
    async with connect(host, port, configuration=config, create_protocol=Client) as client:
        for path in paths:
            stream_id = client._quic.get_next_available_stream_id()
            answer = await raw_request(client, stream_id, path)
            out[path] = summary(answer["status"], answer["headers"], answer["body"])
    return out


async def raw_request(client, stream_id, path):
    head = [
        (b":method", b"GET"),
        (b":scheme", b"https"),
        (b":authority", b"localhost"),
        (b":path", path.encode()),
        (b"accept-encoding", coding_of(path).encode()),
    ]
    done = asyncio.get_running_loop().create_future()
    answer = {"status": None, "headers": {}, "body": b"", "done": done}
    client.waiting[stream_id] = answer
    client.h3.send_headers(stream_id, head, end_stream=True)
    client.transmit()
    await asyncio.wait_for(done, 10)
    return answer


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    ca = sys.argv[2]
    paths = sys.argv[3:]
    out = {
        "http1": with_niquests(host, int(port), ca, paths, http2=False),
        "http2": with_niquests(host, int(port), ca, paths, http2=True),
        "http3": asyncio.run(with_aioquic(host, int(port), ca, paths)),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
