"""One replica's connection: the handshake, the queries a MariaDB replica
sends before it asks for the binlog (answered as a MariaDB source answers
them), COM_REGISTER_SLAVE, and COM_BINLOG_DUMP, which hands the connection
to a ``stream.Stream``.

The replica's session variables (``SET @master_binlog_checksum=...``,
``@slave_connect_state``, ``@master_heartbeat_period``, ...) are kept as the
server keeps user variables, and read back by ``SELECT @name``; the ones
gtidx acts on are read from there when the dump starts.
"""
from __future__ import annotations

import os
import re
import struct
import time
from typing import Callable

from ..errors import GtidxError, ReplicaStartRefused
from ..gtid import Position
from .archive import listed_files, open_series
from .jump import index_jump
from .stream import Skipper, Stream, Until
from .wire import (ER_ACCESS_DENIED, ER_MASTER_FATAL_READING_BINLOG, ER_NOT_SUPPORTED_AUTH_MODE,
                   ER_NOT_SUPPORTED_YET, ER_UNKNOWN_COM, NATIVE_PASSWORD, Connection, ProtocolError,
                   err_packet, handshake, native_password_ok, new_scramble, ok_packet, parse_handshake_response,
                   result_set)

COM_QUIT = 0x01
COM_INIT_DB = 0x02
COM_QUERY = 0x03
COM_PING = 0x0E
COM_BINLOG_DUMP = 0x12
COM_REGISTER_SLAVE = 0x15
BINLOG_DUMP = struct.Struct("<IHI")          # position, flags, the replica's server_id; the file name follows
BINLOG_DUMP_NON_BLOCK = 0x01
BINLOG_SEND_ANNOTATE_ROWS = 0x02

_SET = re.compile(r"\s*SET\s+@(\w+)\s*=\s*(.*?)\s*;?\s*$", re.IGNORECASE | re.DOTALL)
_SELECT_VAR = re.compile(r"\s*SELECT\s+@(\w+)\s*;?\s*$", re.IGNORECASE)
_SELECT_GLOBAL = re.compile(r"\s*SELECT\s+@@(?:GLOBAL\.)?(\w+)\s*;?\s*$", re.IGNORECASE)
_SHOW_VARIABLES = re.compile(r"\s*SHOW\s+(?:GLOBAL\s+)?VARIABLES\s+LIKE\s+'(\w+)'\s*;?\s*$", re.IGNORECASE)
_SET_NAMES = re.compile(r"\s*SET\s+NAMES\s+\w+(\s+COLLATE\s+\w+)?\s*;?\s*$", re.IGNORECASE)
_UNIX_TIMESTAMP = re.compile(r"\s*SELECT\s+UNIX_TIMESTAMP\(\)\s*;?\s*$", re.IGNORECASE)


def refusal_text(e: GtidxError) -> str:
    """What a MariaDB 10.11 source says (error 1236) where gtidx cannot
    start a replica: the server's words for a position it refuses, else
    gtidx's reason."""
    if isinstance(e, ReplicaStartRefused) and e.reason == "purged":
        return ("Could not find GTID state requested by slave in any binlog files. Probably the slave state is "
                "too old and required binlog files have been purged.")
    if isinstance(e, ReplicaStartRefused) and e.reason == "hole":
        return (f"The binlog on the master is missing the GTID {e.gtid} requested by the slave (even though both "
                "a prior and a subsequent sequence number does exist), and GTID strict mode is enabled")
    if isinstance(e, ReplicaStartRefused) and e.reason in ("absent", "diverged"):
        text = f"Error: connecting slave requested to start from GTID {e.gtid}, which is not in the master's binlog"
        if e.reason == "diverged":
            text += (". Since the master's binlog contains GTIDs with higher sequence numbers, it probably means "
                     "that the slave has diverged due to executing extra erroneous transactions")
        return text
    return f"Error: {e}"


def flag(value) -> bool:
    """A replica's boolean session variable (``@slave_gtid_strict_mode=1``)."""
    return str(value if value is not None else "0") not in ("0", "")


def file_start(files: list[str], name: str) -> int:
    """The index in ``files`` of the binlog a file/offset dump names, else
    the server's refusal."""
    names = [f.rsplit("/", 1)[-1] for f in files]
    if name not in names:
        raise GtidxError(f"Could not find first log file name in binary log index file ({name!r})")
    return names.index(name)


def sql_value(text: str, server_vars: dict):
    """The value of a SET's right side: a quoted string, a number, NULL or
    ``@@global.name`` (the source's own variable)."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1].replace("\\'", "'").replace("''", "'")
    m = re.fullmatch(r"@@(?:global\.)?(\w+)", text, re.IGNORECASE)
    if m:
        return server_vars.get(m.group(1).lower())
    if text.upper() == "NULL":
        return None
    return text


class Session:
    """A replica's connection from the handshake to its end (``run``)."""

    def __init__(self, conn: Connection, settings, connection_id: int, log: Callable[[str], None]):
        self.conn, self.settings, self.log = conn, settings, log
        self.connection_id = connection_id
        self.user_vars: dict[str, object] = {}

    # -- the handshake --------------------------------------------------------
    def authenticate(self) -> bool:
        scramble = new_scramble()
        self.conn.send(handshake(self.settings.server_version, self.connection_id, scramble))
        login = parse_handshake_response(self.conn.read_packet())
        if login.plugin not in (None, NATIVE_PASSWORD):
            self.conn.send(err_packet(ER_NOT_SUPPORTED_AUTH_MODE,
                                           f"gtidx serve authenticates with mysql_native_password only, "
                                           f"not {login.plugin.decode(errors='replace')}"))
            return False
        user, password = self.settings.user, self.settings.password
        if user is not None and (login.user != user or not native_password_ok(password, scramble, login.auth)):
            self.conn.send(err_packet(ER_ACCESS_DENIED,
                                           f"Access denied for user '{login.user}' (using password: "
                                           f"{'YES' if login.auth else 'NO'})"))
            return False
        self.conn.send(ok_packet())
        self.log(f"replica connected: user {login.user!r}")
        return True

    # -- commands -------------------------------------------------------------
    def run(self) -> None:
        if not self.authenticate():
            return
        while True:
            packet = self.conn.read_packet()
            self.conn.seq = 1
            if not packet:
                raise ProtocolError("an empty command packet")
            command, body = packet[0], packet[1:]
            if command == COM_QUIT:
                return
            if command == COM_QUERY:
                self.conn.send(*self.answer(body.decode("utf-8", "replace")))
            elif command in (COM_PING, COM_REGISTER_SLAVE, COM_INIT_DB):
                self.conn.send(ok_packet())
            elif command in self.dumps:          # the connection is the stream's from here on
                self.dumps[command](self, body)
                return
            else:
                self.conn.send(err_packet(ER_UNKNOWN_COM, f"gtidx serve does not know command {command:#x}"))

    def server_vars(self) -> dict:
        s = self.settings
        return {"server_id": s.server_id, "binlog_checksum": s.checksum_name, "gtid_domain_id": 0,
                "gtid_strict_mode": 0, "version": s.server_version, "version_comment": "gtidx serve",
                "log_bin": "ON", "binlog_format": "ROW", "gtid_binlog_pos": "", "server_uuid": None}

    def answer(self, query: str) -> list[bytes]:
        """The packets that answer one query."""
        m = _SET.match(query)
        if m:
            self.user_vars[m.group(1).lower()] = sql_value(m.group(2), self.server_vars())
            return [ok_packet()]
        if _SET_NAMES.match(query):      # a client's character set: the stream is binlog bytes
            return [ok_packet()]
        m = _SELECT_VAR.match(query)
        if m:
            return result_set([f"@{m.group(1)}"], [[self.user_vars.get(m.group(1).lower())]])
        m = _SELECT_GLOBAL.match(query)
        if m and m.group(1).lower() in self.server_vars():
            return result_set([query.strip().split()[1]], [[self.server_vars()[m.group(1).lower()]]])
        m = _SHOW_VARIABLES.match(query)
        if m:
            name = m.group(1).lower()
            value = self.server_vars().get(name)
            return result_set(["Variable_name", "Value"], [] if value is None else [[name.upper(), value]])
        if _UNIX_TIMESTAMP.match(query):
            return result_set(["UNIX_TIMESTAMP()"], [[int(time.time())]])
        self.log(f"query not answered: {query!r}")
        return [err_packet(ER_NOT_SUPPORTED_YET, f"gtidx serve does not answer this query: {query[:200]}")]

    # -- the dump ---------------------------------------------------------------
    # the replica's heartbeat period variables (nanoseconds), the first set one counts
    heartbeat_vars = ("master_heartbeat_period",)

    def heartbeat_seconds(self) -> float:
        """The replica's heartbeat period (``heartbeat_vars``), else --heartbeat."""
        for name in self.heartbeat_vars:
            period = str(self.user_vars.get(name) or "")
            if period.isdigit() and int(period) > 0:
                return int(period) / 1e9
        return self.settings.heartbeat_seconds

    def dump(self, body: bytes) -> None:
        if len(body) < BINLOG_DUMP.size:
            raise ProtocolError("a COM_BINLOG_DUMP shorter than its fixed part")
        offset, flags, replica_id = BINLOG_DUMP.unpack_from(body, 0)
        name = body[BINLOG_DUMP.size:].decode("utf-8", "replace")
        heartbeat = self.heartbeat_seconds()
        logs, jump = None, None
        try:
            logs = open_series(self.settings)
            files, store = logs.files, logs.store
            state = self.user_vars.get("slave_connect_state")
            if state is not None:
                # strict mode's hole is refused where the stream meets it, as the server does (Skipper)
                start = logs.replica_start(str(state),
                                           ignore_duplicates=flag(self.user_vars.get("slave_gtid_ignore_duplicates")))
                first, offset = files.index(start.file), start.offset
                skipper = Skipper(start.skip, strict=flag(self.user_vars.get("slave_gtid_strict_mode")))
                jump = index_jump(logs, start, skipper, self.user_vars.get("slave_until_gtid"))
                if jump is not None:
                    self.log(f"replica {replica_id}: the index starts the stream at offset {jump.offset}")
                self.log(f"replica {replica_id}: GTID start {state or '(empty)'}: {start.file}, "
                         f"skipping to {start.skip or 'nothing'}")
            else:
                first, skipper = file_start(files, name), None
                self.log(f"replica {replica_id}: file start {name}:{offset}")
        except GtidxError as e:
            self.log(f"replica {replica_id}: refused: {e}")
            self.conn.send(err_packet(ER_MASTER_FATAL_READING_BINLOG, refusal_text(e)))
            return
        finally:
            if logs is not None:
                logs.close()
        self.conn.seq = 1
        until = self.user_vars.get("slave_until_gtid")
        settings = self.settings
        stream = Stream(self.conn, files, first, max(offset, 4), skipper, settings.server_id, heartbeat,
                        self.log, annotate=bool(flags & BINLOG_SEND_ANNOTATE_ROWS),
                        until=Until(Position.parse(str(until))) if until else None, store=store, jump=jump,
                        relist=(lambda: listed_files(settings)) if os.path.isdir(settings.path) else None)
        try:
            stream.run()
        except ReplicaStartRefused as e:
            stream.flush()
            self.log(f"replica {replica_id}: refused: {e}")
            self.conn.send(err_packet(ER_MASTER_FATAL_READING_BINLOG, refusal_text(e)))

    # the commands that hand the connection to a stream, and the method that answers each
    dumps = {COM_BINLOG_DUMP: dump}
