"""The listening side of ``gtidx serve``: a socket on the address asked for,
a thread per replica.

Why threads and not asyncio: a connection spends its life in one blocking
loop (read a binlog's bytes, send them), the binlog readers it uses
(``binlog.mariadb.Binlog``, the series behind ``api.seek``) are blocking code
shared with every other command, and the replicas of one source are few. A
thread per connection runs that code as it is; asyncio would have to push
every read through an executor anyway. Each thread holds a read window (up
to 8 MiB from an object, 1 MiB from a local file: ``serve.readahead``), the
packets gathered for one send (256 KiB) and at most one longer event.
"""
from __future__ import annotations

import ipaddress
import itertools
import socket
import sys
import threading
from dataclasses import dataclass
from typing import Callable

from ..errors import BadInputError
from .archive import source_facts
from .session import Session
from .wire import Connection, ProtocolError

# What the replica reads as the source's version: MariaDB's replication prefix
# "5.5.5-" (a MariaDB client strips it), then a MariaDB version the 10.5+
# replicas take for a GTID-capable source.
SERVER_VERSION = "5.5.5-10.11.99-MariaDB-gtidx"


@dataclass
class ServeSettings:
    """What ``gtidx serve`` serves and how. ``user`` None: any user and
    password are accepted (allowed on a loopback address only)."""
    path: str
    host: str
    port: int
    server_id: int = 1000
    user: str | None = None
    password: bytes = b""
    heartbeat_seconds: float = 30.0
    checksum_name: str = "CRC32"
    storage_options: dict | None = None     # for an object-store URL (``storage.resolve``)
    history: int | None = None              # the catalog's history to serve (several: one must be picked)
    server_version: str = SERVER_VERSION
    server_uuid: str | None = None      # MySQL's @@server_uuid (None: made up from server_id)
    source_version: str = ""            # the newest binlog's FORMAT_DESCRIPTION's server version
    tls: object = None                  # an ssl.SSLContext (server side): TLS offered to MySQL replicas
    flavor: str | None = None           # the binlogs' ("mysql"; None: MariaDB's), read when the server starts

    def check(self) -> None:
        try:
            loopback = ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            raise BadInputError(f"--bind wants an IP address, not {self.host!r}") from None
        if self.user is None and not loopback:
            raise BadInputError(f"--no-auth on {self.host}: any client could read the binlogs",
                                hint="give --user and --password-file, or --bind a loopback address")
        if not 0 < self.server_id <= 0xFFFFFFFF:
            raise BadInputError(f"--server-id {self.server_id} is not in 1..4294967295")


def stderr_log(line: str) -> None:
    print(f"gtidx serve: {line}", file=sys.stderr, flush=True)


class Server:
    """A listening socket and its connections' threads. ``port`` 0: a free
    one, read back from ``address`` once bound."""

    def __init__(self, settings: ServeSettings, log: Callable[[str], None] = stderr_log):
        from .. import api
        from .mysqlsession import MysqlSession
        settings.check()
        settings.flavor, settings.checksum_name, settings.source_version = source_facts(settings)
        # one session class per flavor, picked here once: MySQL binlogs get MySQL's source side
        self.session_class = api.flavor_pick(settings.flavor, Session, MysqlSession)
        self.settings, self.log = settings, log
        family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((settings.host, settings.port))
        self.sock.listen(16)
        self.address = self.sock.getsockname()[:2]
        self.ids = itertools.count(1)

    def serve_forever(self) -> None:
        self.log(f"serving {self.settings.path} on {self.address[0]}:{self.address[1]}")
        while True:
            sock, peer = self.sock.accept()
            threading.Thread(target=self.handle, args=(sock, peer), daemon=True).start()

    def handle(self, sock: socket.socket, peer) -> None:
        connection_id = next(self.ids)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self.session_class(Connection(sock), self.settings, connection_id, self.log).run()
        except (ProtocolError, OSError) as e:
            self.log(f"connection {connection_id} from {peer[0]}:{peer[1]} ended: {e}")
        except Exception as e:            # one connection's failure never stops the server
            self.log(f"connection {connection_id} from {peer[0]}:{peer[1]} failed: {type(e).__name__}: {e}")
        finally:
            sock.close()
