"""A fault-injecting HTTP proxy in front of an S3 server (moto_server), as a
separate process: ``python tests/s3faults.py PORT UPSTREAM_URL``.

It forwards every request unchanged, except that it answers the next N with
503 SlowDown (S3's throttling) and delays every answer by D seconds, as set
by ``GET /__faults__?slowdown=N&delay=D``; ``GET /__faults__`` reports how
many requests it throttled and forwarded, as JSON. Listens on 127.0.0.1."""
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
    throttled = 0
    forwarded = 0


def handler(upstream: urllib.parse.SplitResult):
    class Proxy(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _faults(self):
            q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            with State.lock:
                if "slowdown" in q:
                    State.slowdown = int(q["slowdown"][0])
                if "delay" in q:
                    State.delay = float(q["delay"][0])
                body = json.dumps({"throttled": State.throttled, "forwarded": State.forwarded,
                                   "slowdown": State.slowdown, "delay": State.delay}).encode()
            self._answer(200, {"Content-Type": "application/json"}, body)

        def _answer(self, status, headers, body, length=None):
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body) if length is None else length))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _any(self):
            if self.path.startswith("/__faults__"):
                return self._faults()
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else None
            with State.lock:
                delay = State.delay
                throttle = State.slowdown > 0
                if throttle:
                    State.slowdown -= 1
                    State.throttled += 1
                else:
                    State.forwarded += 1
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
