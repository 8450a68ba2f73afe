"""``gtidx serve``: a replication source serving a directory of MariaDB
binlogs to a MariaDB replica (experimental; docs/serve.md).

Imported when it runs or a help text lists it (``main.COMMANDS``).
"""
from __future__ import annotations

import json
import sys

import click

from ..errors import BadInputError
from .options import PATH, Number, examples, existing_directory, json_option


def _listen(ctx, param, value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isascii() or not port.isdigit() or int(port) > 65535:
        raise BadInputError(f"--listen {value!r}: expected HOST:PORT, e.g. 127.0.0.1:3307 (port 0: a free one)")
    return host, int(port)


@click.command(epilog=examples("gtidx serve /backups/binlogs --listen 127.0.0.1:3307",
                               "gtidx serve /backups/binlogs --listen 127.0.0.1:3307 --user repl "
                               "--password-file pw.txt"))
@click.argument("directory", type=PATH)
@click.option("--listen", required=True, callback=_listen, metavar="HOST:PORT",
              help="The address to listen on (a port of 0: a free one, said on stderr).")
@click.option("--server-id", type=click.IntRange(1, 0xFFFFFFFF), default=1000, show_default=True,
              help="The server_id the replica sees; it must differ from the replica's own.")
@click.option("--user", default=None, help="The user a replica must log in as (default: any user, "
              "any password; allowed on a loopback address only).")
@click.option("--password-file", type=click.File("rb"), default=None,
              help="The file holding that user's password (its first line).")
@click.option("--heartbeat", type=Number(0.01, 3600), default=30.0, show_default=True,
              help="Seconds between heartbeats at the end of the binlogs, when the replica asks for none.")
@json_option("Log lines on stderr as JSON objects {\"event\": ...}.")
def serve(directory, listen, server_id, user, password_file, heartbeat, as_json):
    """(Experimental) Serve the MariaDB binlogs in DIRECTORY to MariaDB replicas, as
    their source would: CHANGE MASTER TO MASTER_HOST=..., MASTER_PORT=...,
    MASTER_USE_GTID=slave_pos; START SLAVE. A replica gets the events from its GTID
    position (or file and offset) on, file after file; at the end of the binlogs it waits,
    with heartbeats. Read-only; runs until stopped (SIGINT, SIGTERM)."""
    directory = existing_directory(directory, "gtidx serve")
    from ..serve import Server, ServeSettings
    password = b""
    if password_file is not None:
        if user is None:
            raise BadInputError("--password-file needs --user")
        password = password_file.readline().rstrip(b"\r\n")

    def log(line: str) -> None:
        print(json.dumps({"event": line}) if as_json else f"gtidx serve: {line}", file=sys.stderr, flush=True)
    settings = ServeSettings(directory, listen[0], listen[1], server_id=server_id, user=user,
                             password=password, heartbeat_seconds=heartbeat)
    server = Server(settings, log)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        log("stopped")
