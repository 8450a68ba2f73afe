"""``gtidx serve``: a replication source that serves a directory of MariaDB
binlogs to a real MariaDB replica, or MySQL binlogs to a MySQL replica
(docs/serve.md). Experimental.

wire: the client/server protocol's packets; stream: the binlog stream after
COM_BINLOG_DUMP; session: one replica's connection; server: the listening
socket, a thread per connection, each a session of the binlogs' flavor;
mysqlsession, mysqlstream: MySQL's session (caching_sha2_password,
COM_BINLOG_DUMP_GTID) and stream (auto-position).
"""
from .server import Server, ServeSettings

__all__ = ["Server", "ServeSettings"]
