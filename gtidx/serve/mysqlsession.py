"""One MySQL replica's connection to ``gtidx serve`` on MySQL binlogs: the
handshake as a MySQL 8.0+ source does it (``caching_sha2_password``, its
fast path), the queries a MySQL 9.7 replica sends before it asks for the
binlog, and COM_BINLOG_DUMP_GTID (auto-position: the replica's executed
set) or COM_BINLOG_DUMP (file and offset), which hand the connection to a
``mysqlstream.MysqlStream``. The server picks this class for MySQL binlogs
(``api.flavor_pick``); what MariaDB's ``Session`` does the same way
(queries kept as user variables, COM_REGISTER_SLAVE, ...) is inherited.

Why the fast path is enough: caching_sha2_password's client proves the
password with SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) + nonce) at once;
the server's full path (the password itself, over TLS or RSA) is only
for a server that has no SHA256(SHA256(pw)) cached. gtidx knows the
password, so it always has it and always answers "fast auth success"
(docs/serve.md, "MySQL replicas"): no TLS, no RSA key, no
GET_SOURCE_PUBLIC_KEY on the replica.
"""
from __future__ import annotations

import hashlib
import hmac
import re
import struct
import uuid

from ..binlog.mysqlevents import decode_previous_gtids
from ..errors import GtidxError
from ..mysqlgtid import GtidSet
from .archive import open_series
from .mysqlstream import MysqlStream
from .session import BINLOG_DUMP, COM_BINLOG_DUMP, Session, file_start, sql_value
from .wire import (CLIENT_SSL, ER_ACCESS_DENIED, ER_MASTER_FATAL_READING_BINLOG, SERVER_CAPABILITIES,
                   U8, ProtocolError, err_packet, handshake, new_scramble, ok_packet, parse_handshake_response,
                   result_set, wants_tls)

COM_BINLOG_DUMP_GTID = 0x1E
# COM_BINLOG_DUMP_GTID: flags, the replica's server_id, the file name's length (the name follows),
# then the position and the GTID set's length (the set, encoded as a PREVIOUS_GTIDS body, follows).
DUMP_GTID_HEAD = struct.Struct("<HII")
DUMP_GTID_POSITION = struct.Struct("<QI")
CACHING_SHA2 = b"caching_sha2_password"
AUTH_MORE_DATA = 0x01
FAST_AUTH_SUCCESS = 0x03
AUTH_SWITCH = 0xFE
CLIENT_LONG_PASSWORD = 0x1         # MySQL's bit 0: a MySQL server says it (MariaDB's leaves it clear)
MYSQL_CAPABILITIES = SERVER_CAPABILITIES | CLIENT_LONG_PASSWORD
ERRMSG_SIZE = 512                  # MYSQL_ERRMSG_SIZE: an error message's buffer, its NUL included
# MySQL 9.7's words (error 1236), as its source sends them to a replica (cut at 512 bytes as it cuts them)
MORE_GTIDS_TEXT = (
    "Replica has more GTIDs than the source has, using the source's SERVER_UUID. This may indicate that the "
    "the last binary log file was truncated or lost, e.g., after a power failure when sync_binlog != 1. The "
    "source may have rolled back transactions that were already replicated to the replica. Replicate any "
    "transactions that source has rolled back from replica to source, and/or commit empty transactions on "
    "source to account for transactions that have been committed on source but are not included in "
    "GTID_EXECUTED.")[:ERRMSG_SIZE - 1]

PURGED_TEXT = ("Cannot replicate because the source purged required binary logs. Replicate the missing "
               "transactions from elsewhere, or provision a new replica from backup. Consider increasing the "
               "source's binary log expiration period.")
PURGED_TOO_LONG = ("The GTID sets and the missing purged transactions are too long to print in this message. "
                   "For more information, please see the source's error log or the manual for GTID_SUBTRACT")

_SET_LIST = re.compile(r"\s*SET\s+(@.*?)\s*;?\s*$", re.IGNORECASE | re.DOTALL)
_ASSIGNMENT = re.compile(r"\s*@(\w+)\s*=\s*('(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.)*\"|[^,'\"]+?)\s*(?:,|$)",
                         re.DOTALL)
_SELECT_FUNC = re.compile(r"\s*SELECT\s+(\w+)\s*\(\s*\)\s*;?\s*$", re.IGNORECASE)


def refusal_text(e: GtidxError, have: GtidSet | None) -> str:
    """What a MySQL 9.7 source says (error 1236) where gtidx cannot start a
    replica whose executed set is ``have``: the server's words for a
    replica ahead of the binlogs and for purged GTIDs (with both sets where
    the message fits the server's 512 bytes, cut to 511 as it cuts it;
    else its "too long" words), else gtidx's reason."""
    reason = getattr(e, "reason", None)
    if reason == "ahead":
        return MORE_GTIDS_TEXT
    if reason == "purged" and have is not None:
        text = (f"{PURGED_TEXT} The GTID set sent by the replica is '{have}', and the missing transactions "
                f"are '{e.gtid}'")
        if len(text.encode()) <= ERRMSG_SIZE:
            return text.encode()[:ERRMSG_SIZE - 1].decode("utf-8", "ignore")
        return f"{PURGED_TEXT} {PURGED_TOO_LONG}"
    return f"Error: {e}"


def several_assignments(query: str) -> list[tuple[str, str]] | None:
    """(name, value text) of each user variable a ``SET @a = x, @b = y``
    assigns (a MySQL replica sets two names at once, the source_ and the
    master_ one); None for any other query."""
    m = _SET_LIST.match(query)
    if not m:
        return None
    rest, out = m.group(1), []
    while rest:
        a = _ASSIGNMENT.match(rest)
        if not a:
            return None
        out.append((a.group(1), a.group(2)))
        rest = rest[a.end():]
    return out if len(out) > 1 else None


def caching_sha2_ok(password: bytes, nonce: bytes, auth: bytes) -> bool:
    """Does ``auth`` prove ``password``? caching_sha2_password's fast path:
    the client sends SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) + nonce);
    empty for an empty password."""
    if not password:
        return auth == b""
    stage1 = hashlib.sha256(password).digest()
    mask = hashlib.sha256(hashlib.sha256(stage1).digest() + nonce).digest()
    return hmac.compare_digest(bytes(a ^ b for a, b in zip(stage1, mask)), auth) and len(auth) == len(mask)


def made_up_uuid(server_id: int) -> str:
    """The @@server_uuid reported without --server-uuid: one per server_id,
    the same at every start (a replica stores its source's UUID)."""
    return str(uuid.uuid5(uuid.NAMESPACE_OID, f"gtidx-serve-{server_id}"))


class MysqlSession(Session):
    """A MySQL replica's connection (``Session.run`` drives it)."""

    def version(self) -> str:
        return f"{self.settings.source_version or '9.7.0'}-gtidx"

    def run(self) -> None:
        plain = self.conn.sock
        try:
            super().run()
        finally:
            if self.conn.sock is not plain:         # TLS: the server closes the socket it accepted, not this
                self.conn.sock.close()

    def authenticate(self) -> bool:
        nonce = new_scramble()
        tls = self.settings.tls
        self.conn.send(handshake(self.version(), self.connection_id, nonce, CACHING_SHA2,
                                 MYSQL_CAPABILITIES | (CLIENT_SSL if tls is not None else 0)))
        answer, plain = self.conn.read_packet(), self.conn.sock
        if tls is not None and wants_tls(answer):    # TLS, then the handshake response over it
            self.conn.sock = tls.wrap_socket(self.conn.sock, server_side=True)
            answer = self.conn.read_packet()
        login = parse_handshake_response(answer)
        auth = login.auth
        if login.plugin != CACHING_SHA2:        # another plugin's answer: ask again for caching_sha2_password's
            self.conn.send(U8.pack(AUTH_SWITCH) + CACHING_SHA2 + b"\0" + nonce + b"\0")
            auth = self.conn.read_packet()
        user, password = self.settings.user, self.settings.password
        if user is not None and (login.user != user or not caching_sha2_ok(password, nonce, auth)):
            self.conn.send(err_packet(ER_ACCESS_DENIED, f"Access denied for user '{login.user}'@'127.0.0.1' "
                                                        f"(using password: {'YES' if auth else 'NO'})"))
            return False
        if auth:
            self.conn.send(U8.pack(AUTH_MORE_DATA) + U8.pack(FAST_AUTH_SUCCESS))
        self.conn.send(ok_packet())
        self.log(f"MySQL replica connected{' over TLS' if self.conn.sock is not plain else ''}: user {login.user!r}")
        return True

    def server_vars(self) -> dict:
        s = self.settings
        return {**super().server_vars(), "version": self.version(), "gtid_mode": "ON",
                "server_uuid": s.server_uuid or made_up_uuid(s.server_id), "enforce_gtid_consistency": "ON",
                "binlog_transaction_compression": "OFF"}

    def answer(self, query: str) -> list[bytes]:
        assignments = several_assignments(query)
        if assignments:                 # SET @a = x, @b = y: each kept as its own SET keeps it
            for name, value in assignments:
                self.user_vars[name.lower()] = sql_value(value, self.server_vars())
            return [ok_packet()]
        m = _SELECT_FUNC.match(query)
        if m and m.group(1).lower() == "version":
            return result_set(["VERSION()"], [[self.version()]])
        return super().answer(query)

    # ``@source_heartbeat_period``, older replicas' ``@master_heartbeat_period``
    heartbeat_vars = ("source_heartbeat_period", "master_heartbeat_period")

    def declared_checksum(self) -> bool:
        """Did the replica say it handles CRC32 (``@source_binlog_checksum``,
        older ones' ``@master_binlog_checksum``; mysqlbinlog says NONE)?"""
        said = self.user_vars.get("source_binlog_checksum", self.user_vars.get("master_binlog_checksum"))
        return str(said or "").upper() == "CRC32"

    def refuse(self, replica_id: int, e: GtidxError, have: GtidSet | None = None) -> None:
        self.log(f"replica {replica_id}: refused: {e}")
        self.conn.send(err_packet(ER_MASTER_FATAL_READING_BINLOG, refusal_text(e, have)))

    def dump_gtid(self, body: bytes) -> None:
        """COM_BINLOG_DUMP_GTID: auto-position from the replica's executed set."""
        if len(body) < DUMP_GTID_HEAD.size:
            raise ProtocolError("a COM_BINLOG_DUMP_GTID shorter than its fixed part")
        flags, replica_id, n = DUMP_GTID_HEAD.unpack_from(body, 0)     # whatever the flags, the set is there
        at = DUMP_GTID_HEAD.size + n
        if at + DUMP_GTID_POSITION.size > len(body):
            raise ProtocolError("a COM_BINLOG_DUMP_GTID shorter than its file name says")
        requested = body[DUMP_GTID_HEAD.size:at].decode("utf-8", "replace")
        position, size = DUMP_GTID_POSITION.unpack_from(body, at)    # the set picks the file, read from 4
        at += DUMP_GTID_POSITION.size
        if at + size != len(body):
            raise ProtocolError("a COM_BINLOG_DUMP_GTID whose GTID set's length is not the rest of it")
        try:
            have = decode_previous_gtids(body[at:]) if size else GtidSet()
        except (ValueError, struct.error, UnicodeDecodeError) as e:
            raise ProtocolError(f"a COM_BINLOG_DUMP_GTID whose GTID set does not decode: {e}") from None
        logs = None
        try:                          # the series once: its files, the start, the store the stream reads
            logs = open_series(self.settings)
            files, store = logs.files, logs.store
            first = logs.replica_start(have, server_uuid=self.settings.server_uuid).file
        except GtidxError as e:
            if getattr(e, "reason", None) != "anonymous":
                self.refuse(replica_id, e, have)
                return
            first = e.start           # the stream meets it, and ends there as the server's does
        finally:
            if logs is not None:
                logs.close()
        shown = have.one_line() or "(empty)"
        self.log(f"replica {replica_id}: auto-position from {shown if len(shown) <= 200 else shown[:200] + '...'}: "
                 f"{first}")
        self.conn.seq = 1
        MysqlStream(self.conn, files, files.index(first), 4, have, self.settings.server_id,
                    self.heartbeat_seconds(), self.log, requested=(requested, position), flags=flags,
                    declared_checksum=self.declared_checksum(), store=store).run()

    def dump(self, body: bytes) -> None:
        """COM_BINLOG_DUMP: a MySQL replica without auto-position (a file and offset)."""
        if len(body) < BINLOG_DUMP.size:
            raise ProtocolError("a COM_BINLOG_DUMP shorter than its fixed part")
        offset, flags, replica_id = BINLOG_DUMP.unpack_from(body, 0)
        self.dump_from(replica_id, body[BINLOG_DUMP.size:].decode("utf-8", "replace"), offset, flags)

    def dump_from(self, replica_id: int, name: str, offset: int, flags: int) -> None:
        try:
            with open_series(self.settings) as logs:
                files, store = logs.files, logs.store
        except GtidxError as e:
            self.refuse(replica_id, e)
            return
        try:
            first = file_start(files, name)
        except GtidxError as e:
            self.refuse(replica_id, e)
            return
        self.log(f"replica {replica_id}: file start {name}:{offset}")
        self.conn.seq = 1
        MysqlStream(self.conn, files, first, max(offset, 4), None, self.settings.server_id,
                    self.heartbeat_seconds(), self.log, flags=flags, declared_checksum=self.declared_checksum(),
                    store=store).run()

    dumps = {COM_BINLOG_DUMP: dump, COM_BINLOG_DUMP_GTID: dump_gtid}
