#!/usr/bin/env python3
"""HTTP/3 requests to sluice by two independent client libraries: aioquic
(its H3Connection, driven by hand) and niquests (HTTP/1.1 and HTTP/2
disabled). Run by crates/proxy/tests/it/http3_clients.rs, which compares the
answers with an HTTP/1.1 client's.

Usage: h3_clients.py HOST:PORT CA_FILE; prints one JSON object.
"""

import asyncio
import json
import sys

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import StreamReset


class Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.waiting = {}

    def quic_event_received(self, event):
        if isinstance(event, StreamReset) and event.stream_id in self.waiting:
            self.finish(event.stream_id, reset=True)
        for ev in self.h3.handle_event(event):
            answer = self.waiting.get(getattr(ev, "stream_id", None))
            if answer is None:
                continue
            if isinstance(ev, HeadersReceived) and answer["status"] is None:
                fields = {k.decode(): v.decode() for k, v in ev.headers}
                answer["status"] = int(fields.pop(":status"))
                answer["headers"] = fields
            elif isinstance(ev, DataReceived):
                answer["body"] += ev.data
            if getattr(ev, "stream_ended", False):
                self.finish(ev.stream_id, reset=False)

    def finish(self, stream_id, reset):
        answer = self.waiting.pop(stream_id)
        answer["reset"] = reset
        if not answer["done"].done():
            answer["done"].set_result(None)

    async def request(self, method, path, fields=(), body=b""):
        stream_id = self._quic.get_next_available_stream_id()
        head = [
            (b":method", method.encode()),
            (b":scheme", b"https"),
            (b":authority", b"localhost"),
            (b":path", path.encode()),
        ] + [(k.encode(), v.encode()) for k, v in fields]
        done = asyncio.get_running_loop().create_future()
        answer = {"status": None, "headers": {}, "body": b"", "done": done}
        self.waiting[stream_id] = answer
        self.h3.send_headers(stream_id, head, end_stream=not body)
        if body:
            self.h3.send_data(stream_id, body, end_stream=True)
        self.transmit()
        await asyncio.wait_for(done, 10)
        return {
            "status": answer["status"],
            "headers": answer["headers"],
            "body": answer["body"].decode("utf-8", "replace"),
            "reset": answer["reset"],
        }


async def with_aioquic(host, port, ca):
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name="localhost")
    config.load_verify_locations(ca)
    async with connect(host, port, configuration=config, create_protocol=Client) as client:
        return {
            "get": await client.request("GET", "/pets?x=1"),
            "post": await client.request(
                "POST", "/pets", [("content-length", "11")], b"hello world"
            ),
            "missing": await client.request("GET", "/nowhere"),
            # aioquic does not hold back a field section past the peer's
            # SETTINGS_MAX_FIELD_SECTION_SIZE: the proxy must refuse it.
            "oversize": await client.request("GET", "/pets", [("x-big", "b" * 8192)]),
            "after": await client.request("GET", "/pets?x=2"),
        }


def with_niquests(host, port, ca):
    import niquests

    session = niquests.Session(disable_http1=True, disable_http2=True)
    response = session.get(f"https://{host}:{port}/pets?x=1", verify=ca, timeout=10)
    return {
        "status": response.status_code,
        "version": response.raw.version if response.raw is not None else None,
        "http_version": getattr(response, "http_version", None),
        "body": response.text,
    }


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    ca = sys.argv[2]
    out = asyncio.run(with_aioquic(host, int(port), ca))
    out["niquests"] = with_niquests(host, int(port), ca)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
