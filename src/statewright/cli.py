"""The ``statewright`` command line."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sqlite3
import sys
import urllib.error
from pathlib import Path

from . import backup, clock_client, logs, migrate
from .api.auth import AUTH_MODES
from .api.clock import iso, parse_duration
from .api.quotas import LIMIT_MODES, InvalidLimit, QuotaSet, with_settings
from .api.transport import HttpLimits
from .cluster.membership import LeaseSettings
from .engine.tokens import TaskTokens
from .integrations.payload_store import check_target
from .node import ServerConfig, serve
from .sim.config import FAULT_RATE_DEFAULT, STEPS_DEFAULT, SimConfig
from .sim.faults import ALL_FAULTS
from .sim.simulator import simulate_and_print
from .store import is_postgres_url, open_store
from .store.base import SchemaTooNew, StoreUnavailable

DAYS_MAX = 36_500  # --retention-days and --compact-after-days: a century at most
WEIGHT_MAX = 1_000  # --shard-weight


def main(argv: list[str] | None = None) -> int:
    defaults = ServerConfig()
    parser = argparse.ArgumentParser(prog="statewright", description="A durable workflow engine that speaks the "
                                     "AWS Step Functions API.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("serve", help="run the server", description="Serve the Step Functions API. Point "
                              "boto3 or the AWS CLI at it with endpoint_url / --endpoint-url.")
    run.add_argument("--host", default=defaults.host, help=f"address to listen on (default {defaults.host})")
    run.add_argument("--port", type=int, default=defaults.port, help=f"port to listen on (default {defaults.port})")
    run.add_argument("--log-format", choices=logs.FORMATS, default=defaults.log_format,
                     help="text lines, or JSON lines with stable keys for log shippers (default text)")
    run.add_argument("--log-level", choices=logs.LEVELS, default=defaults.log_level, type=str.upper,
                     help=f"the least severe lines logged (default {defaults.log_level})")
    run.add_argument("--otlp-endpoint", default=None, metavar="URL",
                     help="send the traces of state machines whose tracingConfiguration is enabled to this "
                          "OTLP/HTTP endpoint, e.g. http://127.0.0.1:4318 (default $OTEL_EXPORTER_OTLP_ENDPOINT, "
                          "else none)")
    run.add_argument("--console-express-executions", type=int, default=defaults.console_express, metavar="N",
                     help="the last N Express executions of each state machine the web console shows, with their "
                          f"events (default {defaults.console_express}; 0: none kept)")
    run.add_argument("--data-dir", type=Path, default=defaults.data_dir,
                     help=f"directory for the SQLite database; created if missing (default {defaults.data_dir})")
    run.add_argument("--store", default=os.environ.get("STATEWRIGHT_STORE") or None, metavar="URL",
                     help="a postgresql:// URL: keep the data in that PostgreSQL database instead of --data-dir "
                          "(default $STATEWRIGHT_STORE, else SQLite)")
    run.add_argument("--cluster-secret", default=None, metavar="S",
                     help="with --store: the secret every node of the cluster shares, which signs the calls they "
                          "forward to each other (default $STATEWRIGHT_CLUSTER_SECRET)")
    run.add_argument("--advertise", default=None, metavar="URL",
                     help="with --store: the URL the other nodes reach this one at (default http://HOST:PORT)")
    run.add_argument("--lease-ms", type=_positive, default=defaults.leases.lease_ms, metavar="MS",
                     help=f"with --store: how long a shard lease lasts unrenewed (default {defaults.leases.lease_ms})")
    run.add_argument("--lease-renew-ms", type=_positive, default=defaults.leases.renew_ms, metavar="MS",
                     help=f"with --store: how often leases are renewed (default {defaults.leases.renew_ms})")
    run.add_argument("--shard-weight", type=_weight, default=defaults.shard_weight, metavar="N",
                     help="with --store: this node's share of the shards relative to the others' (1-1000, default "
                          "1); takes effect once every node of the cluster runs a release that reads it")
    run.add_argument("--shards", type=int, default=defaults.shards,
                     help=f"number of shards, fixed when the data directory is created (default {defaults.shards})")
    run.add_argument("--account-id", type=_account_id, default=defaults.account_id,
                     help=f"account id put in ARNs, 12 digits (default {defaults.account_id})")
    run.add_argument("--auth", choices=AUTH_MODES, default=defaults.auth,
                     help="open: any credentials or none, one account (--account-id), for local use (the default); "
                          "sigv4: every request signed with a key of --accounts, each account seeing only its own "
                          "resources")
    run.add_argument("--accounts", type=Path, default=None, metavar="FILE",
                     help="with --auth sigv4: the accounts and their keys, as JSON (see the README); read again on "
                          "SIGHUP")
    run.add_argument("--limits", choices=LIMIT_MODES, default=None,
                     help="aws: every quota as AWS sets it, API rate buckets included (the default with --auth "
                          "sigv4); local: the same without the buckets and the open-execution cap (the default with "
                          "--auth open); relaxed: none of them")
    run.add_argument("--limit", action="append", default=[], metavar="NAME=VALUE",
                     help="one quota over --limits' (repeatable): state-machines, activities, tags-per-resource, "
                          "open-executions, versions-per-state-machine, aliases-per-state-machine (a count or none), "
                          "rates (aws or none), rate.ACTION (BUCKET/REFILL or none); see the README's table")
    run.add_argument("--region", default=defaults.region,
                     help=f"region for requests that are not signed for one (default {defaults.region})")
    run.add_argument("--connections", type=Path, default=None,
                     help="JSON file of HTTP Task connections: ConnectionArn -> {AuthorizationType, AuthParameters} "
                          "as EventBridge's CreateConnection takes them")
    run.add_argument("--functions", type=Path, default=None, metavar="FILE",
                     help="JSON file mapping Lambda function names or ARNs to http(s) URLs: a Task invoking a mapped "
                          "function POSTs its payload there and takes the reply as the function's answer (README)")
    run.add_argument("--assume-machine-role", action="store_true",
                     help="make each AWS call as the state machine's role, assumed through the configured STS "
                          "endpoint (a Task's Credentials.RoleArn always is); off: the server's own credentials")
    run.add_argument("--status-events-bus", default=None, metavar="NAME",
                     help="send each execution status change to this EventBridge bus (PutEvents at the configured "
                          "AWS endpoint, source aws.states), as Step Functions does (default: not sent)")
    run.add_argument("--webhooks", type=Path, default=None, metavar="FILE",
                     help="JSON array of http(s) URLs that each execution status change event is POSTed to")
    run.add_argument("--clock", choices=["wall", "virtual"], default="wall",
                     help="virtual: time also moves forward on request (`statewright clock advance`), so Waits, "
                          "retries and timeouts of days pass in a test at once; one server on SQLite (default wall)")
    run.add_argument("--mock-config", type=Path, default=os.environ.get("SFN_MOCK_CONFIG") or None, metavar="FILE",
                     help="mocked responses in Step Functions Local's MockConfigFile format, for executions started "
                          "on STATE_MACHINE_ARN#TestCase (default $SFN_MOCK_CONFIG)")
    run.add_argument("--wait-scale", type=_scale, default=1.0, metavar="F",
                     help="Waits and Retry backoffs last F times their length (0: not at all), as Step Functions "
                          "Local's WAIT_TIME_SCALE; timeouts and heartbeats keep theirs (default 1)")
    run.add_argument("--redrivable-days", type=_positive, default=defaults.redrivable_days, metavar="D",
                     help="RedriveExecution reopens a failed, aborted or timed-out execution for D days after it "
                          f"closed (default {defaults.redrivable_days}, as AWS)")
    run.add_argument("--retention-days", type=_days, default=defaults.retention_days, metavar="D",
                     help="a closed execution's history is readable, and its name taken, for D days after it closed "
                          f"(default {defaults.retention_days}, as AWS; fractions too: 0.5 is 12 hours); then it is "
                          "deleted")
    run.add_argument("--compact-after-days", type=_days, default=defaults.compact_after_days, metavar="D",
                     help="D days after it closed (0: at once), an execution's history moves to the payload store, "
                          f"where it is still read and redriven from (default {defaults.compact_after_days})")
    run.add_argument("--payload-store", type=_payload_store, default=None, metavar="URL",
                     help="where compacted histories go: s3://BUCKET/PREFIX (through botocore: AWS_ENDPOINT_URL_S3 "
                          "for another S3) or a directory (default: payloads/ in the data directory; with --store, "
                          "a table of that database)")
    limits = defaults.limits
    for field, metavar, what in LIMIT_OPTIONS:
        run.add_argument("--" + field.replace("_", "-"), type=_positive, default=getattr(limits, field),
                         metavar=metavar, help=f"{what} (default {getattr(limits, field)})")
    http = defaults.http
    run.add_argument("--connections-max", type=_positive, default=http.connections_max, metavar="N",
                     help="HTTP connections open at once; past them the longest idle one is closed, or the new one "
                          f"if none is idle (default {http.connections_max})")
    run.add_argument("--connections-per-address-max", type=_positive, default=http.connections_per_address_max,
                     metavar="N", help="HTTP connections open at once from one client address, the same way "
                                       f"(default {http.connections_per_address_max})")
    run.add_argument("--first-byte-timeout-ms", type=_positive, default=http.first_byte_timeout_ms, metavar="MS",
                     help="a new connection that has sent nothing this long after it opened is closed "
                          f"(default {http.first_byte_timeout_ms})")
    run.add_argument("--keep-alive-ms", type=_positive, default=http.keep_alive_ms, metavar="MS",
                     help=f"an idle kept-alive connection is closed after this (default {http.keep_alive_ms})")
    run.add_argument("--request-head-timeout-ms", type=_positive, default=http.request_head_timeout_ms,
                     metavar="MS", help="a connection whose request line and headers have not all arrived this "
                                        f"long after it opened (or its request began) is closed "
                                        f"(default {http.request_head_timeout_ms})")
    run.add_argument("--request-body-timeout-ms", type=_positive, default=http.request_body_timeout_ms,
                     metavar="MS", help="a connection whose request body has not all arrived this long after its "
                                        f"head is closed (default {http.request_body_timeout_ms})")
    keys = commands.add_parser(
        "keys", help="list or rotate the keys that sign task tokens",
        description="Task tokens are signed with the newest key; every listed key still verifies. Rotate (nodes "
                    "on PostgreSQL switch within a lease renewal; restart a server on SQLite), and retire an old key "
                    "only once no task it signed can still be pending.")
    keys.add_argument("action", choices=["list", "rotate", "retire"], help="what to do")
    keys.add_argument("key_id", nargs="?", help="the key to retire (with retire)")
    keys.add_argument("--data-dir", type=Path, default=defaults.data_dir,
                      help=f"the server's data directory (default {defaults.data_dir})")
    keys.add_argument("--store", default=os.environ.get("STATEWRIGHT_STORE") or None, metavar="URL",
                      help="the server's postgresql:// URL, if it keeps its data there (default $STATEWRIGHT_STORE)")
    saved = commands.add_parser(
        "backup", help="copy a SQLite data directory, while its server serves it",
        description="Copy the server's database (SQLite's online backup: a snapshot of one moment, the server "
                    "going on meanwhile) and its compacted histories into a new directory. On PostgreSQL, use "
                    "pg_dump or point-in-time recovery instead (README).")
    saved.add_argument("--data-dir", type=Path, default=defaults.data_dir,
                       help=f"the server's data directory (default {defaults.data_dir})")
    saved.add_argument("--to", type=Path, required=True, metavar="PATH", help="a new or empty directory")
    put_back = commands.add_parser(
        "restore", help="put a backup into an empty data directory",
        description="Copy a backup into a data directory that holds no data, then start the server on it: "
                    "executions go on from where the backup was taken.")
    put_back.add_argument("--from", dest="source", type=Path, required=True, metavar="PATH",
                          help="the backup's directory (statewright backup --to)")
    put_back.add_argument("--data-dir", type=Path, default=defaults.data_dir,
                          help=f"the data directory to restore into (default {defaults.data_dir})")
    imported = commands.add_parser(
        "import", help="copy state machines and activities from another Step Functions endpoint into this server",
        description="Copy every state machine (definition, type, role, logging and tracing settings, tags, versions "
                    "and aliases) and activity (with its tags) from another Step Functions endpoint (AWS itself, or "
                    "any emulator) into this server, through boto3 and its credentials. State machines this "
                    "server has already are left as they are. Executions are not copied.")
    imported.add_argument("--from-endpoint", metavar="URL", default=None,
                          help="the endpoint to copy from (default: AWS's own, for --from-region)")
    imported.add_argument("--from-region", default=None, help="its region (default: boto3's, else us-east-1)")
    exported = commands.add_parser(
        "export", help="copy this server's state machines and activities to another Step Functions endpoint",
        description="The other way from import: every state machine and activity of this server copied to "
                    "another endpoint (AWS itself, or any emulator), through boto3 and its credentials.")
    exported.add_argument("--to-endpoint", metavar="URL", default=None,
                          help="the endpoint to copy to (default: AWS's own, for --to-region)")
    exported.add_argument("--to-region", default=None, help="its region (default: boto3's, else us-east-1)")
    for command in (imported, exported):
        command.add_argument("--endpoint-url", default="http://127.0.0.1:8083", metavar="URL",
                             help="this server (default http://127.0.0.1:8083)")
        command.add_argument("--region", default="us-east-1", help="this server's region (default us-east-1)")
    clock = commands.add_parser(
        "clock", help="read or move a server's virtual clock",
        description="Read or move forward the clock of a server started with --clock virtual. Advancing fires, in "
                    "due order and durably, every timer in the span: Waits, Retry backoffs, timeouts, heartbeats.")
    clock.add_argument("action", choices=["now", "advance"], help="what to do")
    clock.add_argument("duration", nargs="?", help="with advance: how far, a whole number and s, m, h or d (90d)")
    clock.add_argument("--endpoint-url", default="http://127.0.0.1:8083", metavar="URL",
                       help="the server (default http://127.0.0.1:8083)")
    simulate = commands.add_parser(
        "simulate", help="run the deterministic simulator",
        description="Run the real engine on a virtual clock over a real SQLite store with named faults, random "
                    "state machines and simulated workers, then check every invariant. One line per seed; a "
                    "violation prints the command that replays it.")
    simulate.add_argument("--seeds", type=int, default=10, help="run seeds 0..N-1 (default 10)")
    simulate.add_argument("--seed", type=int, default=None, help="run this one seed (overrides --seeds)")
    simulate.add_argument("--faults", default="all",
                          help=f"faults to inject, comma-separated, 'all' or 'none' (default all): "
                               f"{', '.join(ALL_FAULTS)}")
    simulate.add_argument("--fault-rate", type=float, default=FAULT_RATE_DEFAULT,
                          help=f"chance of each fault at each chance to fire (default {FAULT_RATE_DEFAULT})")
    simulate.add_argument("--steps", type=int, default=STEPS_DEFAULT,
                          help=f"client actions before the faults stop (default {STEPS_DEFAULT})")
    simulate.add_argument("--nodes", type=int, default=1,
                          help="engine nodes sharing the store, with shard leases (default 1)")
    simulate.add_argument("--limits", choices=["small", "default"], default="small",
                          help="engine limits: small ones make paging and re-reads happen in every run (default), "
                               "or the server's defaults")
    simulate.add_argument("--plant", default="", help=argparse.SUPPRESS)  # test-only planted bugs
    args = parser.parse_args(argv)
    if args.command == "keys":
        return _keys(parser, args)
    if args.command == "simulate":
        return _simulate(parser, args)
    if args.command == "clock":
        return _clock(parser, args)
    if args.command in ("import", "export"):
        return _migrate(args)
    if args.command in ("backup", "restore"):
        try:
            said = (backup.backup(args.data_dir.expanduser(), args.to.expanduser()) if args.command == "backup"
                    else backup.restore(args.source.expanduser(), args.data_dir.expanduser()))
        except (backup.BackupRefused, OSError, sqlite3.Error) as exc:
            print(f"statewright: {exc}", file=sys.stderr)
            return 1
        print(f"statewright: {said}")
        return 0
    if not 0 <= args.console_express_executions <= 1000:
        parser.error("--console-express-executions must be between 0 and 1000")
    if (args.auth == "sigv4") != (args.accounts is not None):
        parser.error("--auth sigv4 needs --accounts FILE" if args.accounts is None else
                     "--accounts is read with --auth sigv4; add it, or drop --accounts")
    quota_settings = {}
    for setting in args.limit:
        name, equals, value = setting.partition("=")
        if not equals:
            parser.error(f"--limit takes NAME=VALUE, not {setting!r}")
        quota_settings[name.strip()] = value.strip()
    try:
        with_settings(QuotaSet(), quota_settings)
    except InvalidLimit as exc:
        parser.error(f"--limit {exc}")
    if args.shards < 1:
        parser.error("--shards must be at least 1")
    if args.store and not is_postgres_url(args.store):
        parser.error(f"--store takes a postgresql:// URL, not {args.store!r} (SQLite lives in --data-dir)")
    secret = args.cluster_secret or os.environ.get("STATEWRIGHT_CLUSTER_SECRET") or None
    try:
        leases = LeaseSettings(args.lease_ms, args.lease_renew_ms)
    except ValueError as exc:
        parser.error(f"--lease-ms / --lease-renew-ms: {exc}")
    tuned = dataclasses.replace(limits, **{field: getattr(args, field) for field, _, _ in LIMIT_OPTIONS})
    # The slice is at least the steps after which a step stops entering states, or no step would ever stop in time
    tuned = dataclasses.replace(tuned, evaluation_slice_steps=max(tuned.evaluation_slice_steps, tuned.apply_steps_max))
    http = HttpLimits(args.keep_alive_ms, args.request_head_timeout_ms, args.request_body_timeout_ms,
                      args.connections_max, args.connections_per_address_max, args.first_byte_timeout_ms)
    return serve(ServerConfig(args.host, args.port, args.data_dir, args.shards, args.account_id, args.region,
                              args.connections, tuned, args.store, secret, args.advertise, leases, http,
                              args.clock == "virtual", args.wait_scale, args.mock_config, args.functions,
                              args.assume_machine_role, args.redrivable_days,
                              status_events_bus=args.status_events_bus, webhooks=args.webhooks,
                              retention_days=args.retention_days, compact_after_days=args.compact_after_days,
                              payload_store=args.payload_store, log_level=args.log_level,
                              log_format=args.log_format, otlp_endpoint=args.otlp_endpoint,
                              shard_weight=args.shard_weight, console_express=args.console_express_executions,
                              auth=args.auth, accounts=args.accounts, quota_mode=args.limits,
                              quota_settings=quota_settings))


def _migrate(args: argparse.Namespace) -> int:
    """import and export: through botocore's clients, the other endpoint with the usual credentials (environment,
    profile, role), this server with them too or, without any, with placeholders (it checks none by default)."""
    import botocore.session
    from botocore.exceptions import BotoCoreError, ClientError

    session = botocore.session.get_session()
    region = session.get_config_variable("region") or "us-east-1"
    placeholders = {} if session.get_credentials() else {"aws_access_key_id": "statewright",
                                                         "aws_secret_access_key": "statewright"}
    here = session.create_client("stepfunctions", endpoint_url=args.endpoint_url, region_name=args.region,
                                 **placeholders)
    if args.command == "import":
        source = session.create_client("stepfunctions", endpoint_url=args.from_endpoint,
                                       region_name=args.from_region or region)
        target = here
    else:
        source = here
        target = session.create_client("stepfunctions", endpoint_url=args.to_endpoint,
                                       region_name=args.to_region or region)
    try:
        report = migrate.copy(source, target)
    except (ClientError, BotoCoreError) as exc:
        print(f"statewright: {args.command} stopped: {exc}", file=sys.stderr)
        return 1
    for line in report.lines():
        print(f"statewright: {line}")
    return 0


# serve's options for the engine's limits (engine/limits.py): the field, its unit, what it bounds and what then
LIMIT_OPTIONS = [
    ("inbox_commands_max", "N", "commands of one account that may wait for the engine; past them its requests get "
                                "ThrottlingException"),
    ("http_calls_concurrent_max", "N", "HTTP Task calls in flight at once; more wait their turn"),
    ("activity_backlog_tasks_max", "N", "activity tasks held in memory for workers, all activities together; more "
                                        "wait in the database"),
    ("evaluation_steps_max", "N", "JSONata, intrinsic and JSONPath steps one transition step may evaluate; past them "
                                  "the state fails"),
    ("evaluation_ms_max", "MS", "wall time of evaluation in one transition step"),
    ("evaluation_items_max", "N", "array items and string characters evaluation may build in one transition step"),
    ("item_reader_page_bytes", "N", "bytes of a JSONL or CSV object a distributed Map reads at a time"),
    ("item_reader_page_items", "N", "objects of an S3 listing a distributed Map reads at a time"),
    ("apply_states_max", "N", "states one execution runs in one transition step before it continues in a later "
                              "tick"),
    ("apply_steps_max", "N", "evaluation steps after which an execution enters no more states in this tick"),
    ("evaluation_slice_steps", "N", "evaluation steps a transition step may spend on the engine thread; past them "
                                    "it is decided in the heavy lane"),
    ("heavy_pause_ms", "MS", "how long an execution that stopped on --apply-steps-max waits before it goes on"),
]


def _weight(text: str) -> int:
    value = _positive(text)
    if value > WEIGHT_MAX:
        raise argparse.ArgumentTypeError(f"must be at most {WEIGHT_MAX}, not {value}")
    return value


def _account_id(text: str) -> str:
    if not (len(text) == 12 and text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"must be 12 digits, as an AWS account id is, not {text!r}")
    return text


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _days(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of days, not {text!r}") from None
    if not 0 <= value <= DAYS_MAX:
        raise argparse.ArgumentTypeError(f"must be from 0 to {DAYS_MAX} days, not {text}")
    return value


def _payload_store(text: str) -> str:
    try:
        return check_target(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _scale(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, not {text!r}") from None
    if not 0 <= value <= 1_000:
        raise argparse.ArgumentTypeError(f"must be from 0 to 1000, not {text}")
    return value


def _simulate(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    names = {"all": ALL_FAULTS, "none": ()}.get(args.faults, [name for name in args.faults.split(",") if name])
    unknown = set(names) - set(ALL_FAULTS)
    if unknown:
        parser.error(f"unknown fault(s) {', '.join(sorted(unknown))}; known: {', '.join(ALL_FAULTS)}")
    logging.disable(logging.ERROR)  # the engine logs every injected fault; the checkers report what matters
    seeds = [args.seed] if args.seed is not None else range(args.seeds)
    planted = frozenset(name for name in args.plant.split(",") if name)
    results = [simulate_and_print(SimConfig(seed, frozenset(names), args.steps, args.nodes, args.fault_rate,
                                            planted, args.limits)) for seed in seeds]
    faults = sum(sum(result.injected.values()) for result in results)
    violations = sum(len(result.violations) for result in results)
    print(f"{len(results)} seeds, {faults} faults injected, {violations} violations")
    return 1 if violations else 0


def _clock(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.action == "now" and args.duration:
        parser.error(f"now takes no duration; to move the clock: statewright clock advance {args.duration}")
    if args.action == "advance":
        if not args.duration:
            parser.error("advance needs a duration, such as 90d")
        try:
            parse_duration(args.duration)
        except ValueError as exc:
            parser.error(str(exc))
    try:
        if args.action == "advance":
            reading = clock_client.call(args.endpoint_url, "AdvanceClock", {"by": args.duration})
        else:
            reading = clock_client.call(args.endpoint_url, "GetClock", {})
    except urllib.error.HTTPError as refused:
        message = json.loads(refused.read() or b"{}").get("message", refused.reason)
        print(f"statewright: {message}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"statewright: cannot reach {args.endpoint_url}: {exc}", file=sys.stderr)
        return 1
    print(iso(int(reading["now"] * 1000)))
    return 0


def _keys(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.store:
        if not is_postgres_url(args.store):
            parser.error(f"--store takes a postgresql:// URL, not {args.store!r}")
        target = args.store
    else:
        target = args.data_dir.expanduser() / "statewright.db"
        if not target.exists():
            parser.error(f"no statewright data in {args.data_dir}; pass the server's --data-dir or --store")
    try:
        store = open_store(target, None)
    except (LookupError, SchemaTooNew, StoreUnavailable) as exc:
        print(f"statewright: {exc}", file=sys.stderr)
        return 1
    try:
        if args.action == "rotate":
            key_id = TaskTokens.rotate(store)
            print(f"signing with {key_id}: nodes on PostgreSQL switch within a lease renewal, a server on SQLite "
                  f"at its next start")
        elif args.action == "retire":
            if not args.key_id:
                parser.error("retire needs the key id (see `statewright keys list`)")
            try:
                TaskTokens.retire(store, args.key_id)
            except ValueError as exc:
                parser.error(str(exc))
            print(f"{args.key_id} retired: tokens it signed are refused by nodes on PostgreSQL within a lease renewal, "
                  f"by a server on SQLite from its next start")
        tokens = TaskTokens.load(store)
        for key_id in sorted(tokens.keys, key=lambda kid: int(kid[1:])):
            print(key_id + ("  (signs new tokens)" if key_id == tokens.current else ""))
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
