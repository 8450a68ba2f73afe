"""The MariaDB client/server protocol as a source speaks it to a replica:
packets, the handshake (protocol 10, ``mysql_native_password``), OK, ERR
and EOF packets and text result sets. The one owner of these byte layouts.

Every packet is a 3-byte length and a 1-byte sequence number before its
payload; a payload of 2**24 - 1 bytes or more goes out in pieces of that
size, the last one shorter (an empty one when it divides evenly).
"""
from __future__ import annotations

import hashlib
import os
import socket
import struct

PACKET_HEAD = struct.Struct("<HBB")          # length (low 16 bits, high 8 bits), sequence number
MAX_PIECE = 0xFFFFFF
U8 = struct.Struct("<B")
U16 = struct.Struct("<H")
U32 = struct.Struct("<I")
# The initial handshake after the server version: connection id, scramble part 1, filler,
# capabilities (low), collation, status, capabilities (high), scramble length, 6 reserved,
# MariaDB's extended capabilities.
HANDSHAKE_MIDDLE = struct.Struct("<I8sBHBHHB6sI")
# The replica's HandshakeResponse41: capabilities, max packet size, collation, 19 reserved,
# MariaDB's extended capabilities.
HANDSHAKE_RESPONSE = struct.Struct("<IIB19sI")
ERR_HEAD = struct.Struct("<BH1s5s")          # 0xff, error code, '#', SQLSTATE
EOF_PACKET = struct.Struct("<BHH")           # 0xfe, warnings, status
OK_TAIL = struct.Struct("<HH")               # status, warnings (after the two length-coded numbers)
COLUMN_TAIL = struct.Struct("<BHIBHB2x")     # 0x0c, collation, length, type, flags, decimals

PROTOCOL_VERSION = 10
SCRAMBLE_LEN = 20
NATIVE_PASSWORD = b"mysql_native_password"
UTF8MB4_GENERAL_CI = 45
STATUS_AUTOCOMMIT = 0x0002
TYPE_VAR_STRING = 253

CLIENT_LONG_FLAG = 0x4
CLIENT_CONNECT_WITH_DB = 0x8
CLIENT_PROTOCOL_41 = 0x200
CLIENT_SSL = 0x800                 # offered only with a TLS certificate; a client asking sends an SSLRequest first
CLIENT_TRANSACTIONS = 0x2000
CLIENT_SECURE_CONNECTION = 0x8000
CLIENT_MULTI_RESULTS = 0x20000
CLIENT_PLUGIN_AUTH = 0x80000
CLIENT_CONNECT_ATTRS = 0x100000
CLIENT_PLUGIN_AUTH_LENENC = 0x200000
# What gtidx offers: no SSL, no compression, no CLIENT_DEPRECATE_EOF (result sets end with
# EOF packets), and not CLIENT_MYSQL (bit 0): the replica takes the source for a MariaDB server.
SERVER_CAPABILITIES = (CLIENT_LONG_FLAG | CLIENT_CONNECT_WITH_DB | CLIENT_PROTOCOL_41 | CLIENT_TRANSACTIONS
                       | CLIENT_SECURE_CONNECTION | CLIENT_MULTI_RESULTS | CLIENT_PLUGIN_AUTH
                       | CLIENT_CONNECT_ATTRS | CLIENT_PLUGIN_AUTH_LENENC)

# The server error codes gtidx sends, with their SQLSTATEs (MariaDB's numbers).
ER_ACCESS_DENIED = (1045, b"28000")
ER_NOT_SUPPORTED_AUTH_MODE = (1251, b"08004")
ER_UNKNOWN_COM = (1047, b"08S01")
ER_NOT_SUPPORTED_YET = (1235, b"42000")
ER_MASTER_FATAL_READING_BINLOG = (1236, b"HY000")


class ProtocolError(Exception):
    """A packet that breaks the protocol, or a peer gone: the connection ends
    with this reason logged; the server goes on."""


class Connection:
    """One socket with the sequence numbers of the packets on it."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.seq = 0

    def _exact(self, n: int) -> bytes:
        parts, left = [], n
        while left:
            chunk = self.sock.recv(min(left, 1 << 16))
            if not chunk:
                raise ProtocolError("the replica closed the connection")
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts)

    def read_packet(self, limit: int = 1 << 20) -> bytes:
        """One payload (pieces joined), at most ``limit`` bytes: a replica
        sends short commands, never a long one."""
        payload = bytearray()
        while True:
            low, high, seq = PACKET_HEAD.unpack(self._exact(PACKET_HEAD.size))
            n = low | high << 16
            if len(payload) + n > limit:
                raise ProtocolError(f"a packet of more than {limit} bytes from the replica")
            payload += self._exact(n)
            self.seq = (seq + 1) & 0xFF
            if n < MAX_PIECE:
                return bytes(payload)

    def frame(self, payload: bytes) -> bytes:
        """``payload`` as the packets that carry it, numbered on from ``seq``."""
        out, at = [], 0
        while True:
            piece = payload[at:at + MAX_PIECE]
            out.append(PACKET_HEAD.pack(len(piece) & 0xFFFF, len(piece) >> 16, self.seq))
            out.append(piece)
            self.seq = (self.seq + 1) & 0xFF
            at += MAX_PIECE
            if len(piece) < MAX_PIECE:
                return b"".join(out)

    def send(self, *payloads: bytes) -> None:
        self.sock.sendall(b"".join(self.frame(p) for p in payloads))

    def gather(self, out: bytearray, first: bytes, rest) -> None:
        """The packet of the payload ``first`` + ``rest`` (shorter than a
        piece) appended to ``out``, to go out with others in one send."""
        n = len(first) + len(rest)
        if n >= MAX_PIECE:
            raise ValueError("gather takes payloads shorter than a packet piece")
        out += PACKET_HEAD.pack(n & 0xFFFF, n >> 16, self.seq)
        out += first
        out += rest
        self.seq = (self.seq + 1) & 0xFF

    def send_prefixed(self, first: bytes, rest) -> None:
        """One payload, ``first`` + ``rest``: a large ``rest`` (a binlog event)
        goes out from where it is, not copied behind ``first``."""
        n = len(first) + len(rest)
        if n < 1 << 16 or n >= MAX_PIECE:
            self.send(first + bytes(rest))
            return
        self.sock.sendall(PACKET_HEAD.pack(n & 0xFFFF, n >> 16, self.seq) + first)
        self.sock.sendall(rest)
        self.seq = (self.seq + 1) & 0xFF


def lenenc_int(n: int) -> bytes:
    if n < 251:
        return U8.pack(n)
    if n < 1 << 16:
        return b"\xfc" + U16.pack(n)
    if n < 1 << 24:
        return b"\xfd" + U32.pack(n)[:3]
    return b"\xfe" + struct.pack("<Q", n)


def lenenc_str(s: bytes) -> bytes:
    return lenenc_int(len(s)) + s


def read_lenenc_int(buf: bytes, at: int) -> tuple[int, int]:
    """(value, the offset after it) of the length-coded integer at ``at``."""
    if at >= len(buf):
        raise ProtocolError("a length-coded integer past the packet's end")
    first = buf[at]
    width = {0xfc: 2, 0xfd: 3, 0xfe: 8}.get(first, 0)
    if first == 0xfb or first == 0xff:
        raise ProtocolError(f"byte {first:#x} starts no length-coded integer")
    if not width:
        return first, at + 1
    if at + 1 + width > len(buf):
        raise ProtocolError("a length-coded integer past the packet's end")
    return int.from_bytes(buf[at + 1:at + 1 + width], "little"), at + 1 + width


def read_nul_str(buf: bytes, at: int) -> tuple[bytes, int]:
    end = buf.find(b"\0", at)
    if end < 0:
        raise ProtocolError("a NUL-terminated string with no NUL")
    return buf[at:end], end + 1


def new_scramble() -> bytes:
    """20 random bytes, none NUL (the handshake carries them NUL-terminated)."""
    return bytes(1 + b % 127 for b in os.urandom(SCRAMBLE_LEN))


def handshake(server_version: str, connection_id: int, scramble: bytes, plugin: bytes = NATIVE_PASSWORD,
              capabilities: int = SERVER_CAPABILITIES) -> bytes:
    """The initial handshake packet, protocol 10, offering ``plugin``."""
    return (U8.pack(PROTOCOL_VERSION) + server_version.encode() + b"\0"
            + HANDSHAKE_MIDDLE.pack(connection_id, scramble[:8], 0, capabilities & 0xFFFF,
                                    UTF8MB4_GENERAL_CI, STATUS_AUTOCOMMIT, capabilities >> 16,
                                    SCRAMBLE_LEN + 1, b"\0" * 6, 0)
            + scramble[8:] + b"\0" + plugin + b"\0")


class Login:
    """What a replica's handshake response says: its user, its auth
    response, the plugin that made it (None: it named none)."""

    def __init__(self, user: str, auth: bytes, plugin: bytes | None):
        self.user, self.auth, self.plugin = user, auth, plugin


def parse_handshake_response(payload: bytes) -> Login:
    if len(payload) < HANDSHAKE_RESPONSE.size:
        raise ProtocolError("a handshake response shorter than its fixed part")
    caps = HANDSHAKE_RESPONSE.unpack_from(payload, 0)[0]
    if not caps & CLIENT_PROTOCOL_41:
        raise ProtocolError("a client without protocol 4.1")
    user, at = read_nul_str(payload, HANDSHAKE_RESPONSE.size)
    if caps & CLIENT_PLUGIN_AUTH_LENENC:
        n, at = read_lenenc_int(payload, at)
    elif caps & CLIENT_SECURE_CONNECTION:
        n, at = payload[at] if at < len(payload) else 0, at + 1
    else:
        raise ProtocolError("a client without secure connection auth")
    auth = payload[at:at + n]
    if len(auth) != n:
        raise ProtocolError("an auth response past the packet's end")
    at += n
    if caps & CLIENT_CONNECT_WITH_DB and at < len(payload):
        _, at = read_nul_str(payload, at)
    plugin = None
    if caps & CLIENT_PLUGIN_AUTH and at < len(payload):
        plugin, at = read_nul_str(payload, at)
    return Login(user.decode("utf-8", "replace"), auth, plugin)


def wants_tls(payload: bytes) -> bool:
    """Is this answer to the handshake an SSLRequest (the fixed part of a
    HandshakeResponse41 alone, CLIENT_SSL set): TLS first, then the
    response, over it?"""
    return len(payload) == HANDSHAKE_RESPONSE.size and bool(HANDSHAKE_RESPONSE.unpack(payload)[0] & CLIENT_SSL)


def native_password_ok(password: bytes, scramble: bytes, auth: bytes) -> bool:
    """Does ``auth`` prove ``password``? mysql_native_password: the client sends
    SHA1(password) XOR SHA1(scramble + SHA1(SHA1(password))); empty for an
    empty password."""
    if not password:
        return auth == b""
    stage1 = hashlib.sha1(password).digest()
    mask = hashlib.sha1(scramble + hashlib.sha1(stage1).digest()).digest()
    return len(auth) == len(mask) and bytes(a ^ b for a, b in zip(stage1, mask)) == auth


def ok_packet() -> bytes:
    return b"\0" + lenenc_int(0) + lenenc_int(0) + OK_TAIL.pack(STATUS_AUTOCOMMIT, 0)


def err_packet(error: tuple[int, bytes], message: str) -> bytes:
    code, state = error
    return ERR_HEAD.pack(0xFF, code, b"#", state) + message.encode("utf-8", "replace")


def eof_packet() -> bytes:
    return EOF_PACKET.pack(0xFE, 0, STATUS_AUTOCOMMIT)


def result_set(columns: list[str], rows: list[list]) -> list[bytes]:
    """A text result set of string columns: its payloads, in order. A None value is SQL NULL."""
    out = [lenenc_int(len(columns))]
    for name in columns:
        out.append(lenenc_str(b"def") + lenenc_str(b"") + lenenc_str(b"") + lenenc_str(b"")
                   + lenenc_str(name.encode()) + lenenc_str(name.encode())
                   + COLUMN_TAIL.pack(0x0C, UTF8MB4_GENERAL_CI, 1024, TYPE_VAR_STRING, 0, 0))
    out.append(eof_packet())
    for row in rows:
        out.append(b"".join(b"\xfb" if v is None else lenenc_str(str(v).encode()) for v in row))
    out.append(eof_packet())
    return out
