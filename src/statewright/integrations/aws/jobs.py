"""Start a job and wait for it (``.sync``): AWS Batch submitJob, ECS runTask, Glue startJobRun, Athena
startQueryExecution, CodeBuild startBuild.

The start is an ordinary call (``calls``); its answer submits the attempt with the job's handle (what the describe
call needs). The engine then polls: a timer in the execution's commit fires a poll dispatch, this module's
``poll`` makes the describe call, and the attempt either ends (the job's final describe output as the result, or
``States.TaskFailed`` with it as the cause) or is polled again later, less often each time. A restart loses no
poll (the timer and the dispatch are rows). When the attempt is abandoned (its deadline, a stop of the execution,
a sibling's failure), the job is stopped where the API allows: TerminateJob, StopTask, BatchStopJobRun,
StopQueryExecution, StopBuild.

A describe call that fails in passing (throttled, the service's own error, no answer) is tried again at the next
poll, and so is one whose report was lost (the engine's poll timers go on whatever becomes of each report); a
describe call the service refuses (the job is gone, access denied) fails the attempt. An ECS task succeeds when
every container exited 0.

Sources: AWS's pages on each integration's "Run a Job (.sync)" pattern (the result is the job's description,
the terminal statuses). Inferred: the poll schedule (AWS does not document its own), ECS's exit codes deciding the
task's outcome.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore import xform_name
from botocore.exceptions import BotoCoreError, ClientError

from ...asl.jsonio import dumps
from ...decider.outcomes import AttemptFailed, AttemptPolled, AttemptSucceeded
from . import catalogue, shapes
from .calls import TASK_FAILED

Outcome = AttemptSucceeded | AttemptFailed | AttemptPolled
RUNNING, SUCCEEDED, FAILED = "RUNNING", "SUCCEEDED", "FAILED"


@dataclass(frozen=True)
class Job:
    service: str  # botocore's name
    handle: Callable[[dict, dict], dict | None]  # (start input, start output) -> what describe needs, or None
    describe: str
    describe_params: Callable[[dict], dict]
    progress: Callable[[dict], tuple[str, Any]]  # describe's output -> (RUNNING | SUCCEEDED | FAILED, the result)
    stop: str
    stop_params: Callable[[dict], dict]
    # Where the result ``progress`` takes is modelled: an operation whose output holds it, and the path to it in
    # that output (botocore member names; 0 for a list's items). CodeBuild's {"Build": ...} is StartBuild's.
    result_of: tuple[str, tuple[str | int, ...]]


def _first(items: Any) -> dict | None:
    return items[0] if isinstance(items, list) and items and isinstance(items[0], dict) else None


def _batch(output: dict) -> tuple[str, Any]:
    job = _first(output.get("Jobs"))
    if job is None:
        return FAILED, output
    return {"SUCCEEDED": SUCCEEDED, "FAILED": FAILED}.get(job.get("Status"), RUNNING), job


def _ecs_handle(given: dict, output: dict) -> dict | None:
    task = _first(output.get("Tasks"))
    return None if task is None else {"Cluster": task.get("ClusterArn"), "Task": task.get("TaskArn")}


def _ecs(output: dict) -> tuple[str, Any]:
    task = _first(output.get("Tasks"))
    if task is None:
        return FAILED, output
    if task.get("LastStatus") != "STOPPED":
        return RUNNING, task
    exits = [container.get("ExitCode") for container in task.get("Containers", [])]
    return (SUCCEEDED if exits and all(code == 0 for code in exits) else FAILED), task  # None: it never ran


def _glue(output: dict) -> tuple[str, Any]:
    run = output.get("JobRun", {})
    state = run.get("JobRunState")
    if state == "SUCCEEDED":
        return SUCCEEDED, run
    return (FAILED if state in ("FAILED", "ERROR", "TIMEOUT", "STOPPED", "EXPIRED") else RUNNING), run


def _athena(output: dict) -> tuple[str, Any]:
    state = output.get("QueryExecution", {}).get("Status", {}).get("State")
    return {"SUCCEEDED": SUCCEEDED, "FAILED": FAILED, "CANCELLED": FAILED}.get(state, RUNNING), output


def _codebuild(output: dict) -> tuple[str, Any]:
    build = _first(output.get("Builds"))
    if build is None:
        return FAILED, output
    status = build.get("BuildStatus")
    if status == "SUCCEEDED":
        return SUCCEEDED, {"Build": build}
    return (FAILED if status in ("FAILED", "FAULT", "TIMED_OUT", "STOPPED") else RUNNING), {"Build": build}


JOBS: dict[tuple[str, str], Job] = {
    ("batch", "submitJob"): Job(
        "batch", lambda given, out: {"JobId": out["JobId"]} if "JobId" in out else None,
        "DescribeJobs", lambda job: {"jobs": [job["JobId"]]}, _batch,
        "TerminateJob", lambda job: {"jobId": job["JobId"], "reason": "The Step Functions task was stopped"},
        ("DescribeJobs", ("jobs", 0))),
    ("ecs", "runTask"): Job(
        "ecs", _ecs_handle, "DescribeTasks", lambda job: {"cluster": job["Cluster"], "tasks": [job["Task"]]}, _ecs,
        "StopTask", lambda job: {"cluster": job["Cluster"], "task": job["Task"],
                                 "reason": "The Step Functions task was stopped"},
        ("DescribeTasks", ("tasks", 0))),
    ("glue", "startJobRun"): Job(
        "glue", lambda given, out: {"JobName": given.get("JobName"), "RunId": out["JobRunId"]}
        if "JobRunId" in out else None,
        "GetJobRun", lambda job: {"JobName": job["JobName"], "RunId": job["RunId"]}, _glue,
        "BatchStopJobRun", lambda job: {"JobName": job["JobName"], "JobRunIds": [job["RunId"]]},
        ("GetJobRun", ("JobRun",))),
    ("athena", "startQueryExecution"): Job(
        "athena", lambda given, out: {"QueryExecutionId": out["QueryExecutionId"]}
        if "QueryExecutionId" in out else None,
        "GetQueryExecution", lambda job: {"QueryExecutionId": job["QueryExecutionId"]}, _athena,
        "StopQueryExecution", lambda job: {"QueryExecutionId": job["QueryExecutionId"]},
        ("GetQueryExecution", ())),
    ("codebuild", "startBuild"): Job(
        "codebuild", lambda given, out: {"Id": out["Build"]["Id"]} if "Id" in out.get("Build", {}) else None,
        "BatchGetBuilds", lambda job: {"ids": [job["Id"]]}, _codebuild,
        "StopBuild", lambda job: {"id": job["Id"]}, ("StartBuild", ())),
}


def handle(kind: str, action: str, given: Any, output: Any) -> dict | None:
    """What polling the job a start call answered with needs, or None when the answer holds no job."""
    job = JOBS.get((kind, action))
    if job is None or not isinstance(output, dict):
        return None
    return job.handle(given if isinstance(given, dict) else {}, output)


def poll(kind: str, action: str, handle_: dict, client: Any, number: int) -> Outcome:
    """Poll ``number``'s describe call (blocking: on a pool thread): the attempt's outcome, or AttemptPolled while
    the job runs."""
    job = JOBS[(kind, action)]
    try:
        raw = getattr(client, xform_name(job.describe))(**job.describe_params(handle_))
    except ClientError as error:
        if _passing(error):
            return AttemptPolled(number)  # the next poll tries again
        detail = error.response.get("Error", {})
        return AttemptFailed(TASK_FAILED, f"The job could not be followed: {job.describe} was refused with "
                                          f"{detail.get('Code')}: {detail.get('Message')}")
    except BotoCoreError:
        return AttemptPolled(number)  # no answer (the network, a timeout): the next poll tries again
    operation = catalogue.by_botocore_name(job.service).model.operation_model(job.describe)
    status, result = job.progress(shapes.response(operation.output_shape, raw))
    if status == RUNNING:
        return AttemptPolled(number)
    if status == SUCCEEDED:
        return AttemptSucceeded(dumps(result))
    return AttemptFailed(TASK_FAILED, dumps(result))


_THROTTLED = frozenset({"Throttling", "ThrottlingException", "ThrottledException", "TooManyRequestsException",
                        "RequestLimitExceeded", "RequestThrottled", "SlowDown"})


def _passing(error: ClientError) -> bool:
    """Whether a refused describe call may succeed when tried again: throttled, or the service's own failure."""
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 500)
    return status >= 500 or status == 429 or error.response.get("Error", {}).get("Code") in _THROTTLED


def stop(kind: str, action: str, handle_: dict, client: Any, number: int) -> None:
    """Stop the job (blocking); a job that already ended, or a refusal, is left as it is."""
    job = JOBS[(kind, action)]
    getattr(client, xform_name(job.stop))(**job.stop_params(handle_))
