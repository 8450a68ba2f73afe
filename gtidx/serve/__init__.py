"""``gtidx serve``: a replication source that serves a directory of MariaDB
binlogs to a real MariaDB replica (docs/serve.md). Experimental.

wire: the client/server protocol's packets; stream: the binlog stream after
COM_BINLOG_DUMP; session: one replica's connection; server: the listening
socket, a thread per connection.
"""
from .server import Server, ServeSettings

__all__ = ["Server", "ServeSettings"]
