"""``python -m statewright.worker ACTIVITY_ARN module:function``: run a worker from a shell until SIGTERM/SIGINT.

Credentials come from the usual places boto3 looks (statewright accepts any).
"""

from __future__ import annotations

import argparse
import importlib
import logging

from .runner import Worker


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m statewright.worker",
                                     description="Run an activity worker until SIGTERM or SIGINT.")
    parser.add_argument("activity_arn")
    parser.add_argument("handler", help="the function to run for each task, as module:function")
    parser.add_argument("--endpoint-url", help="the service's URL (default: AWS)")
    parser.add_argument("--region", help="default: the activity ARN's region")
    parser.add_argument("--concurrency", type=int, default=4, help="tasks run at once (default 4)")
    parser.add_argument("--heartbeat-seconds", type=float, help="send a heartbeat this often while a task runs")
    parser.add_argument("--worker-name", help="the name recorded in ActivityStarted (default host-pid)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    module_name, _, function_name = args.handler.partition(":")
    if not function_name:
        parser.error("handler must be module:function")
    handler = getattr(importlib.import_module(module_name), function_name)
    options = {key: value for key, value in (("endpoint_url", args.endpoint_url), ("region_name", args.region))
               if value}
    Worker(args.activity_arn, handler, concurrency=args.concurrency, heartbeat_seconds=args.heartbeat_seconds,
           worker_name=args.worker_name, **options).run()


if __name__ == "__main__":
    main()
