"""The ``statewright`` command line."""

from __future__ import annotations

import argparse
from pathlib import Path

from .api.server import ServerConfig, serve


def main(argv: list[str] | None = None) -> int:
    defaults = ServerConfig()
    parser = argparse.ArgumentParser(prog="statewright", description="A durable workflow engine that speaks the "
                                     "AWS Step Functions API.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("serve", help="run the server", description="Serve the Step Functions API. Point "
                              "boto3 or the AWS CLI at it with endpoint_url / --endpoint-url.")
    run.add_argument("--host", default=defaults.host, help=f"address to listen on (default {defaults.host})")
    run.add_argument("--port", type=int, default=defaults.port, help=f"port to listen on (default {defaults.port})")
    run.add_argument("--data-dir", type=Path, default=defaults.data_dir,
                     help=f"directory for the SQLite database; created if missing (default {defaults.data_dir})")
    run.add_argument("--shards", type=int, default=defaults.shards,
                     help=f"number of shards, fixed when the data directory is created (default {defaults.shards})")
    run.add_argument("--account-id", default=defaults.account_id,
                     help=f"account id put in ARNs (default {defaults.account_id})")
    run.add_argument("--region", default=defaults.region,
                     help=f"region for requests that are not signed for one (default {defaults.region})")
    run.add_argument("--connections", type=Path, default=None,
                     help="JSON file of HTTP Task connections: ConnectionArn -> {AuthorizationType, AuthParameters} "
                          "as EventBridge's CreateConnection takes them")
    args = parser.parse_args(argv)
    if args.shards < 1:
        parser.error("--shards must be at least 1")
    return serve(ServerConfig(args.host, args.port, args.data_dir, args.shards, args.account_id, args.region,
                              args.connections))


if __name__ == "__main__":
    raise SystemExit(main())
