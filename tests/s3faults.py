"""A fault-injecting HTTP proxy in front of an S3 server (moto_server), as a
separate process: ``python tests/s3faults.py PORT UPSTREAM_URL``.

It forwards every request unchanged, except as set by
``GET /__faults__?NAME=VALUE&...``:

* ``slowdown=N``: the next N requests are answered 503 SlowDown (S3's throttling);
* ``delay=D``: every answer waits D seconds before it starts;
* ``drop=N``: the next N ranged GETs are forwarded, then the connection is
  closed without an answer;
* ``cut=N``: the next N ranged GETs are answered with their status and full
  Content-Length but only half the body, then the connection is closed (a
  transfer broken half-way);
* ``short=N``: the next N ranged GETs get half the body, and a
  Content-Length saying so (a body cut where nothing on the wire tells);
* ``trickle=D``: ranged GETs' bodies are sent in 1 KiB pieces D seconds
  apart (a slow read: the answer starts at once, then stalls);
* ``skip=K``: drop, cut and short spare the next K ranged GETs first (a
  fault at the K+1th read of a lookup: every read of it can be hit in turn).

Uploads (a PUT with a body: a whole object or one part of a multipart upload):

* ``dropup=N``: the next N uploads are read half-way, then the connection is
  closed (a connection dropped in the middle of an upload);
* ``stall=N``: the next N uploads are read whole and never answered, until
  the client gives up and closes the connection (a timeout);
* ``corrupt=N``: the next N uploads are forwarded with one byte of the body
  changed and without their checksum headers (an object stored with other
  bytes than were sent, which only its ETag tells);
* ``upskip=K``: those faults spare the next K uploads first.

``GET /__faults__`` reports how many requests it throttled, dropped, cut
and forwarded, and every request forwarded (``requests``: [method, path,
Range header or null]), as JSON. Listens on 127.0.0.1."""
from __future__ import annotations

import http.client
import json
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SLOWDOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
            b'<Message>Please reduce your request rate.</Message></Error>')


class State:
    lock = threading.Lock()
    slowdown = 0
    delay = 0.0
    drop = 0
    cut = 0
    short = 0
    trickle = 0.0
    skip = 0
    dropup = 0
    stall = 0
    corrupt = 0
    upskip = 0
    ranged = 0
    uploads = 0
    stalled = 0
    corrupted = 0
    throttled = 0
    dropped = 0
    damaged = 0
    forwarded = 0
    requests: list = []

    @classmethod
    def report(cls) -> dict:
        return {**{k: getattr(cls, k) for k in ("throttled", "dropped", "damaged", "forwarded", "ranged", "slowdown",
                                                "delay", "drop", "cut", "short", "trickle", "skip", "dropup",
                                                "stall", "corrupt", "upskip", "uploads", "stalled", "corrupted")},
                "requests": list(cls.requests)}

    @classmethod
    def take(cls, name: str) -> bool:
        """One of the next ``name`` faults (its count down by one), if any are left."""
        left = getattr(cls, name)
        if left > 0:
            setattr(cls, name, left - 1)
        return left > 0


def handler(upstream: urllib.parse.SplitResult):
    class Proxy(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _faults(self):
            q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            with State.lock:
                for name in ("slowdown", "drop", "cut", "short", "skip", "dropup", "stall", "corrupt", "upskip"):
                    if name in q:
                        setattr(State, name, int(q[name][0]))
                for name in ("delay", "trickle"):
                    if name in q:
                        setattr(State, name, float(q[name][0]))
                body = json.dumps(State.report()).encode()
            self._answer(200, {"Content-Type": "application/json"}, body)

        def _answer(self, status, headers, body, length=None, trickle=0.0):
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body) if length is None else length))
            self.end_headers()
            if self.command == "HEAD":
                return
            if not trickle:
                self.wfile.write(body)
                return
            for i in range(0, len(body), 1024):
                self.wfile.write(body[i:i + 1024])
                self.wfile.flush()
                time.sleep(trickle)

        def _any(self):
            if self.path.startswith("/__faults__"):
                return self._faults()
            n = int(self.headers.get("Content-Length") or 0)
            upload = self.command == "PUT" and n > 0
            with State.lock:
                State.uploads += upload
                hit = upload and not State.take("upskip") and \
                    next((f for f in ("dropup", "stall", "corrupt") if State.take(f)), None)
                State.dropped += hit == "dropup"
                State.stalled += hit == "stall"
                State.corrupted += hit == "corrupt"
            if hit == "dropup":
                self.rfile.read(n // 2)
                self.close_connection = True
                return
            body = self.rfile.read(n) if n else None
            if hit == "stall":
                self.close_connection = True
                self.connection.settimeout(120)
                try:
                    while self.connection.recv(4096):       # until the client closes it
                        pass
                except OSError:
                    pass
                return
            if hit == "corrupt":
                body = bytes([body[0] ^ 0xFF]) + body[1:]
                for k in [k for k in self.headers if k.lower().startswith(("x-amz-checksum", "content-md5"))]:
                    del self.headers[k]
            ranged = self.command == "GET" and "Range" in self.headers
            with State.lock:
                delay = State.delay
                throttle = State.take("slowdown")
                State.ranged += ranged
                spared = ranged and not throttle and State.take("skip")
                fault = next((f for f in ("drop", "cut", "short") if ranged and State.take(f)), None) \
                    if not (throttle or spared) else None
                trickle = State.trickle if ranged else 0.0
                if throttle:
                    State.throttled += 1
                else:
                    State.forwarded += 1
                    State.requests.append([self.command, self.path, self.headers.get("Range")])
                State.dropped += fault == "drop"
                State.damaged += fault in ("cut", "short")
            if delay:
                time.sleep(delay)
            if throttle:
                return self._answer(503, {"Content-Type": "application/xml"}, SLOWDOWN)
            conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "keep-alive")}
            conn.request(self.command, self.path, body=body, headers=headers)
            r = conn.getresponse()
            data = r.read()
            conn.close()
            out = {k: v for k, v in r.getheaders()
                   if k.lower() not in ("content-length", "transfer-encoding", "connection")}
            if fault == "drop":
                self.close_connection = True
                return
            if fault in ("cut", "short"):
                self.close_connection = True
                half = data[:len(data) // 2]
                return self._answer(r.status, out, half, len(data) if fault == "cut" else None)
            if trickle:
                return self._answer(r.status, out, data, None, trickle)
            # a HEAD's Content-Length is the object's, not its (empty) body's
            self._answer(r.status, out, data, r.getheader("Content-Length") if self.command == "HEAD" else None)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any
    return Proxy


def main() -> None:
    port, upstream = int(sys.argv[1]), urllib.parse.urlsplit(sys.argv[2])
    server = ThreadingHTTPServer(("127.0.0.1", port), handler(upstream))
    server.serve_forever()


if __name__ == "__main__":
    main()
