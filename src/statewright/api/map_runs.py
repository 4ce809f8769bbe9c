"""Map run operations: ListMapRuns, DescribeMapRun, UpdateMapRun, and the children ListExecutions lists by map run.

A map run is a row of its own (decider/map_runs.py): its row is listed under its parent execution, and its
children's rows under it. Its fields and their types are AWS's (LocalStack's AWS-validated
test_sfn_api_map_run snapshot: toleratedFailureCount an integer, toleratedFailurePercentage a float, the same eight
counts for items and executions).
"""

from __future__ import annotations

from typing import Any

from ..decider import map_runs
from ..decider.execution import ExecutionState
from ..engine import commands
from . import arns, paging
from .arns import Scope
from .errors import AwsError, invalid_arn, resource_not_found
from .service import Service, handler, seconds


def check(arn: str) -> None:
    """A map run ARN: ``...:mapRun:<state machine>/<label>:<id>``."""
    rest = arns.parse(arn, "mapRun")
    if len(rest) != 2 or "/" not in rest[0]:
        raise invalid_arn(f"Invalid ARN: {arn}")


async def load(service: Service, arn: str) -> ExecutionState:
    check(arn)
    blob = await service.store_call(service.store.load_execution, arn)
    run = None if blob is None else ExecutionState.from_blob(blob)
    if run is None or run.run is None or service.retention.expired(run, service.clock()):
        raise resource_not_found(arn)
    return run


@handler("DescribeMapRun")
async def describe_map_run(service: Service, params: dict, scope: Scope) -> dict:
    state = await load(service, params["mapRunArn"])
    run = state.run
    counts = map_runs.counts(state)
    described: dict[str, Any] = {
        "mapRunArn": state.arn, "executionArn": run.parent_arn, "status": state.status,
        "startDate": seconds(state.start_ms), "maxConcurrency": run.max_concurrency,
        "toleratedFailurePercentage": float(run.tolerated_percentage or 0),
        "toleratedFailureCount": run.tolerated_count or 0,
        "itemCounts": map_runs.item_counts(state, counts), "executionCounts": counts,
        "redriveCount": state.redrive_count,
    }
    if state.stop_ms is not None:
        described["stopDate"] = seconds(state.stop_ms)
    if state.redrive_ms is not None:
        described["redriveDate"] = seconds(state.redrive_ms)
    return described


@handler("ListMapRuns")
async def list_map_runs(service: Service, params: dict, scope: Scope) -> dict:
    execution_arn = params["executionArn"]
    arns.execution(execution_arn)
    if await service.store_call(service.store.load_execution, execution_arn) is None:
        raise AwsError("ExecutionDoesNotExist", f"Execution Does Not Exist: '{execution_arn}'")
    try:
        page = await service.store_call(service.store.list_executions, execution_arn, None,
                                        paging.page_size(params.get("maxResults")),
                                        paging.decode(params.get("nextToken")))
    except ValueError:  # a token that decodes but is no cursor of ours
        raise AwsError("InvalidToken", f"Invalid Token: '{params['nextToken']}'") from None
    items = []
    for summary in page.items:
        item = {"executionArn": execution_arn, "mapRunArn": summary.arn,
                "stateMachineArn": map_runs.machine_of(summary.arn), "startDate": seconds(summary.start_ms)}
        if summary.stop_ms is not None:
            item["stopDate"] = seconds(summary.stop_ms)
        items.append(item)
    return paging.listing("mapRuns", items, page.next_cursor)


@handler("UpdateMapRun")
async def update_map_run(service: Service, params: dict, scope: Scope) -> dict:
    arn = params["mapRunArn"]
    check(arn)
    if not {"maxConcurrency", "toleratedFailurePercentage", "toleratedFailureCount"} & params.keys():
        raise AwsError("ValidationException", "at least one of the parameters maxConcurrency, "
                       "toleratedFailurePercentage, or toleratedFailureCount must be provided")
    percentage = params.get("toleratedFailurePercentage")
    state = await load(service, arn)
    if not state.is_open:  # (inferred: AWS documents no answer for a closed run)
        raise AwsError("ValidationException", f"Map Run {arn} is {state.status}: only a running Map Run can be "
                       "updated")
    try:
        await service.run(commands.UpdateMapRun(arn, params.get("maxConcurrency"),
                                                params.get("toleratedFailureCount"),
                                                None if percentage is None else float(percentage)))
    except commands.ExecutionDoesNotExist:
        raise resource_not_found(arn) from None
    return {}
