"""``gtidx serve``: a replication source serving a directory (or an
object-store prefix) of MariaDB binlogs to a MariaDB replica, or MySQL
binlogs to a MySQL replica (experimental; docs/serve.md).

Imported when it runs or a help text lists it (``main.COMMANDS``).
"""
from __future__ import annotations

import json
import sys

import click

from ..errors import BadInputError
from .options import PATH, Number, examples, existing_directory, history_option, json_option, storage_option


@click.command(epilog=examples("gtidx serve /backups/binlogs --user repl --password-file pw.txt",
                               "gtidx serve /backups/binlogs --port 0 --no-auth",
                               "gtidx serve s3://backups/binlogs/ --user repl --password-file pw.txt"))
@click.argument("directory", metavar="PATH_OR_URL", type=PATH)
@click.option("--bind", default="127.0.0.1", show_default=True, metavar="ADDRESS",
              help="The IP address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=3307, show_default=True,
              help="The port to listen on (0: a free one, said on stderr).")
@click.option("--server-id", type=click.IntRange(1, 0xFFFFFFFF), default=1000, show_default=True,
              help="The server_id the replica sees; it must differ from the replica's own.")
@click.option("--server-uuid", default=None, metavar="UUID",
              help="MySQL binlogs: the @@server_uuid replicas see (the binlogs' server's: its extra GTIDs are "
                   "refused as that server refuses them; default: one made up from --server-id, and every "
                   "GTID the binlogs lack is refused).")
@click.option("--tls-cert", type=PATH, default=None, metavar="FILE",
              help="MySQL replicas: a PEM certificate (chain) to offer TLS with (with --tls-key); "
                   "a 9.7 replica asks for TLS unless SOURCE_SSL=0.")
@click.option("--tls-key", type=PATH, default=None, metavar="FILE", help="The PEM private key of --tls-cert.")
@click.option("--user", default=None, help="The user a replica must log in as (with --password-file).")
@click.option("--password-file", type=click.File("rb"), default=None,
              help="The file holding that user's password (its first line).")
@click.option("--no-auth", is_flag=True, help="Accept any user and password (on a loopback --bind only).")
@click.option("--heartbeat", type=Number(0.01, 3600), default=30.0, show_default=True,
              help="Seconds between heartbeats at the end of the binlogs, when the replica asks for none.")
@storage_option
@history_option("PATH_OR_URL")
@json_option("Log lines on stderr as JSON objects {\"event\": ...}.")
def serve(directory, bind, port, server_id, server_uuid, tls_cert, tls_key, user, password_file, no_auth, heartbeat,
          storage_options, history, as_json):
    """(Experimental) Serve the MariaDB binlogs in PATH_OR_URL (a directory, or an object-store
    prefix such as s3://bucket/binlogs/, read in ranged GETs) to MariaDB replicas, as
    their source would: CHANGE MASTER TO MASTER_HOST=..., MASTER_PORT=...,
    MASTER_USE_GTID=slave_pos; START SLAVE. A replica gets the events from its GTID
    position (or file and offset) on, file after file; at the end of a directory's binlogs
    it follows the directory (what a server writes there next), with heartbeats. MySQL
    binlogs (a directory or a prefix too) go to MySQL 9.7 replicas with auto-position: CHANGE REPLICATION SOURCE TO ...,
    SOURCE_AUTO_POSITION=1, SOURCE_SSL=0; START REPLICA (at the end they wait, with
    heartbeats). Read-only; runs until stopped (SIGINT, SIGTERM)."""
    from ..storage import is_url, local_path        # here: a help text listing the commands loads none of it
    if not is_url(directory) or directory.startswith("file://"):
        directory = existing_directory(local_path(directory, "gtidx serve"), "gtidx serve")
    from ..serve import Server, ServeSettings
    password = b""
    if no_auth and (user is not None or password_file is not None):
        raise BadInputError("--no-auth takes no --user or --password-file")
    if not no_auth and (user is None or password_file is None):
        raise BadInputError("gtidx serve needs --user and --password-file (or --no-auth, on loopback only)")
    if password_file is not None:
        password = password_file.readline().rstrip(b"\r\n")

    def log(line: str) -> None:
        print(json.dumps({"event": line}) if as_json else f"gtidx serve: {line}", file=sys.stderr, flush=True)
    if server_uuid is not None:
        from ..mysqlgtid import MysqlGtid
        try:
            server_uuid = MysqlGtid.parse(f"{server_uuid}:1").uuid    # the model's UUID rule
        except BadInputError:
            raise BadInputError(f"--server-uuid wants a UUID like 3e11fa47-71ca-11e1-9e33-c80aa9429562, "
                                f"not {server_uuid!r}") from None
    tls = None
    if (tls_cert is None) != (tls_key is None):
        raise BadInputError("--tls-cert and --tls-key go together")
    if tls_cert is not None:
        import ssl
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            tls.load_cert_chain(tls_cert, tls_key)
        except (OSError, ssl.SSLError) as e:
            raise BadInputError(f"cannot load the TLS certificate {tls_cert} with key {tls_key}: "
                                f"{getattr(e, 'strerror', None) or e}") from None
    settings = ServeSettings(directory, bind, port, server_id=server_id, server_uuid=server_uuid, tls=tls,
                             user=user, password=password, heartbeat_seconds=heartbeat,
                             storage_options=storage_options, history=history)
    server = Server(settings, log)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        log("stopped")
