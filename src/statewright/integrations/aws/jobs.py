"""Start a job and wait for it (``.sync``): every optimized integration AWS gives the pattern (Batch, ECS, Glue,
Athena, CodeBuild, SageMaker, EMR, EMR on EKS, EMR Serverless, EKS, Glue DataBrew, Bedrock, MediaConvert).

The start is an ordinary call (``calls``); its answer submits the attempt with the job's handle (what the describe
call needs). The engine then polls: a timer in the execution's commit fires a poll dispatch, this module's
``poll`` makes the describe call, and the attempt either ends (the job's final describe output as the result, or
the start call's own answer for a resource waited into a state or deleted; ``States.TaskFailed`` with the describe
output as the cause) or is polled again later, less often each time. A restart loses no
poll (the timer and the dispatch are rows). When the attempt is abandoned (its deadline, a stop of the execution,
a sibling's failure), the job is stopped where Step Functions stops it (TerminateJob, StopTask, BatchStopJobRun,
StopQueryExecution, StopBuild, Stop...Job, CancelSteps, CancelJobRun, ...); clusters, applications and node groups
are left as they are, as AWS's EMR and EKS pages say. A deletion (``eks:deleteCluster.sync``) is done once its
describe call answers that the resource does not exist.

A describe call that fails in passing (throttled, the service's own error, no answer) is tried again at the next
poll, and so is one whose report was lost (the engine's poll timers go on whatever becomes of each report); a
describe call the service refuses (the job is gone, access denied) fails the attempt. An ECS task succeeds when
every container exited 0.

Sources: AWS's pages on each integration's "Run a Job (.sync)" pattern (what it waits for; the describe and stop
calls its IAM policy allows). Inferred: the poll schedule (AWS does not document its own; EMR's page says 60 s,
then 300 s after ten minutes), ECS's exit codes deciding the task's outcome, which statuses are a failure where
the pages do not say, and which result (the last describe call's answer, or the start call's).
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
    stop: str | None  # None: Step Functions leaves it running when the task is abandoned
    stop_params: Callable[[dict], dict] | None
    # Where the result ``progress`` takes is modelled: an operation whose output holds it, and the path to it in
    # that output (botocore member names; 0 for a list's items). CodeBuild's {"Build": ...} is StartBuild's.
    result_of: tuple[str, tuple[str | int, ...]]
    gone_is_done: bool = False  # a deletion: done once describe answers that it does not exist
    # the result is the start call's answer (kept in the handle as "Started"), not the last describe's: a resource
    # waited into a state (EMR's cluster, EMR Serverless's application; AWS's samples read $.ClusterId after
    # createCluster.sync) or deleted
    answers_start: bool = False


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


def _status(path: tuple[str, ...], succeeded: str | tuple[str, ...], failed: tuple[str, ...],
            result: tuple[str, ...] = ()) -> Callable[[dict], tuple[str, Any]]:
    """Progress read at ``path`` of the describe output: one of ``succeeded``, one of ``failed``, else running; the
    result is the output (or what is at ``result`` in it)."""
    done = (succeeded,) if isinstance(succeeded, str) else succeeded
    def progress(output: dict) -> tuple[str, Any]:
        value: Any = output
        for step in path:
            value = value.get(step) if isinstance(value, dict) else None
        found: Any = output
        for step in result:
            found = found.get(step, {}) if isinstance(found, dict) else {}
        return (SUCCEEDED if value in done else FAILED if value in failed else RUNNING), found
    return progress


def _sagemaker(kind: str) -> Job:
    """A SageMaker job: Create<kind>Job's name, Describe<kind>Job until Completed, Stop<kind>Job."""
    name = f"{kind}JobName"
    return Job("sagemaker", lambda given, out: {name: given[name]} if given.get(name) else None,
               f"Describe{kind}Job", lambda job: {name: job[name]},
               _status((f"{kind}JobStatus",), "Completed", ("Failed", "Stopped")),
               f"Stop{kind}Job", lambda job: {name: job[name]}, (f"Describe{kind}Job", ()))


def _eks(kind: str, *, delete: bool) -> Job:
    """An EKS cluster, node group or Fargate profile: described until ACTIVE, or (``delete``) until it is gone.
    Step Functions stops none of them (AWS's EKS page)."""
    member = {"Cluster": "Name", "Nodegroup": "NodegroupName", "FargateProfile": "FargateProfileName"}[kind]
    lower = member[0].lower() + member[1:]

    def handle_(given: dict, out: dict) -> dict | None:
        described = out.get(kind) or {}
        name = given.get(member) or described.get(member)
        if not name:
            return None
        return {member: name, **({"ClusterName": given["ClusterName"]} if kind != "Cluster" else {})}

    def params(job: dict) -> dict:
        return {("name" if kind == "Cluster" else lower): job[member],
                **({"clusterName": job["ClusterName"]} if kind != "Cluster" else {})}
    progress = (_status((kind, "Status"), (), ("DELETE_FAILED", "FAILED")) if delete
                else _status((kind, "Status"), "ACTIVE", ("FAILED", "CREATE_FAILED")))
    return Job("eks", handle_, f"Describe{kind}", params, progress, None, None,
               (f"{'Delete' if delete else 'Describe'}{kind}", ()), gone_is_done=delete, answers_start=delete)


def _serverless(start: str, state: str | tuple[str, ...], failed: tuple[str, ...] = ()) -> Job:
    """An EMR Serverless application, described until it is in ``state``; the result is ``start``'s answer."""
    return Job("emr-serverless", lambda given, out: {"ApplicationId": out.get("ApplicationId")}
               if out.get("ApplicationId") else None,
               "GetApplication", lambda job: {"applicationId": job["ApplicationId"]},
               _status(("Application", "State"), state, failed), None, None, (start, ()), answers_start=True)


def _serverless_run(start: str, state: str, stop: bool) -> Job:
    """An EMR Serverless job run, described until it is in ``state`` (stopped with CancelJobRun if ``stop``); the
    result is ``start``'s answer."""
    def params(job: dict) -> dict:
        return {"applicationId": job["ApplicationId"], "jobRunId": job["JobRunId"]}
    return Job("emr-serverless", lambda given, out: {"ApplicationId": out["ApplicationId"], "JobRunId": out["JobRunId"]}
               if out.get("JobRunId") else None, "GetJobRun", params,
               _status(("JobRun", "State"), state,
                       ("FAILED", "CANCELLED") if state != "CANCELLED" else ("FAILED", "SUCCESS")),
               "CancelJobRun" if stop else None, params if stop else None, (start, ()), answers_start=True)


def _emr_cluster(start: str, state: str, failed: tuple[str, ...]) -> Job:
    """An EMR cluster, described until it is in ``state``; the result is ``start``'s answer. Step Functions
    terminates no cluster (AWS's EMR page)."""
    return Job("emr", lambda given, out: {"ClusterId": out.get("ClusterId") or given.get("ClusterId")}
               if out.get("ClusterId") or given.get("ClusterId") else None,
               "DescribeCluster", lambda job: {"ClusterId": job["ClusterId"]},
               _status(("Cluster", "Status", "State"), state, failed), None, None, (start, ()), answers_start=True)


def _build_batch(given: dict, out: dict) -> dict | None:
    batch = out.get("BuildBatch") or {}
    return {"Id": batch["Id"]} if batch.get("Id") else None


_BUILD_BATCH = Job("codebuild", _build_batch, "BatchGetBuildBatches", lambda job: {"ids": [job["Id"]]},
                   lambda output: _codebuild_batch(output), "StopBuildBatch", lambda job: {"id": job["Id"]},
                   ("StartBuildBatch", ()))


def _codebuild_batch(output: dict) -> tuple[str, Any]:
    batch = _first(output.get("BuildBatches"))
    if batch is None:
        return FAILED, output
    status = batch.get("BuildBatchStatus")
    return (SUCCEEDED if status == "SUCCEEDED" else FAILED if status in ("FAILED", "FAULT", "TIMED_OUT", "STOPPED")
            else RUNNING), {"BuildBatch": batch}


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
    ("codebuild", "startBuildBatch"): _BUILD_BATCH,
    ("codebuild", "retryBuildBatch"): _BUILD_BATCH,
    **{("sagemaker", f"create{kind}Job"): _sagemaker(kind)
       for kind in ("Training", "Transform", "Processing", "HyperParameterTuning", "Labeling")},
    ("elasticmapreduce", "createCluster"): _emr_cluster("RunJobFlow", "WAITING",
                                                        ("TERMINATED", "TERMINATED_WITH_ERRORS")),
    ("elasticmapreduce", "terminateCluster"): _emr_cluster("TerminateJobFlows", "TERMINATED",
                                                           ("TERMINATED_WITH_ERRORS",)),
    ("elasticmapreduce", "addStep"): Job(
        "emr", lambda given, out: {"ClusterId": given.get("ClusterId"), "StepId": out["StepId"]}
        if out.get("StepId") else None,
        "DescribeStep", lambda job: {"ClusterId": job["ClusterId"], "StepId": job["StepId"]},
        _status(("Step", "Status", "State"), "COMPLETED", ("CANCELLED", "FAILED", "INTERRUPTED")),
        "CancelSteps", lambda job: {"ClusterId": job["ClusterId"], "StepIds": [job["StepId"]]},
        ("DescribeStep", ())),
    ("emr-containers", "startJobRun"): Job(
        "emr-containers", lambda given, out: {"VirtualClusterId": out["VirtualClusterId"], "Id": out["Id"]}
        if out.get("Id") and out.get("VirtualClusterId") else None,
        "DescribeJobRun", lambda job: {"virtualClusterId": job["VirtualClusterId"], "id": job["Id"]},
        _status(("JobRun", "State"), "COMPLETED", ("FAILED", "CANCELLED")),
        "CancelJobRun", lambda job: {"virtualClusterId": job["VirtualClusterId"], "id": job["Id"]},
        ("DescribeJobRun", ())),
    ("emr-containers", "deleteVirtualCluster"): Job(
        "emr-containers", lambda given, out: {"Id": out["Id"]} if out.get("Id") else None,
        "DescribeVirtualCluster", lambda job: {"id": job["Id"]},
        _status(("VirtualCluster", "State"), "TERMINATED", ("ARRESTED",)), None, None,
        ("DescribeVirtualCluster", ())),
    # created: CREATED, or any state an application reaches only once created (one that starts itself)
    ("emr-serverless", "createApplication"): _serverless(
        "CreateApplication", ("CREATED", "STARTING", "STARTED", "STOPPING", "STOPPED"), ("TERMINATED",)),
    ("emr-serverless", "startApplication"): _serverless("StartApplication", "STARTED", ("STOPPED", "TERMINATED")),
    ("emr-serverless", "stopApplication"): _serverless("StopApplication", "STOPPED", ("TERMINATED",)),
    ("emr-serverless", "deleteApplication"): _serverless("DeleteApplication", "TERMINATED"),
    ("emr-serverless", "startJobRun"): _serverless_run("StartJobRun", "SUCCESS", stop=True),
    ("emr-serverless", "cancelJobRun"): _serverless_run("CancelJobRun", "CANCELLED", stop=False),
    ("eks", "createCluster"): _eks("Cluster", delete=False),
    ("eks", "deleteCluster"): _eks("Cluster", delete=True),
    ("eks", "createNodegroup"): _eks("Nodegroup", delete=False),
    ("eks", "deleteNodegroup"): _eks("Nodegroup", delete=True),
    ("eks", "createFargateProfile"): _eks("FargateProfile", delete=False),
    ("eks", "deleteFargateProfile"): _eks("FargateProfile", delete=True),
    ("databrew", "startJobRun"): Job(
        "databrew", lambda given, out: {"Name": given.get("Name"), "RunId": out["RunId"]} if out.get("RunId") else None,
        "DescribeJobRun", lambda job: {"Name": job["Name"], "RunId": job["RunId"]},
        _status(("State",), "SUCCEEDED", ("FAILED", "STOPPED", "TIMEOUT")),
        "StopJobRun", lambda job: {"Name": job["Name"], "RunId": job["RunId"]}, ("DescribeJobRun", ())),
    ("bedrock", "createModelCustomizationJob"): Job(
        "bedrock", lambda given, out: {"JobArn": out["JobArn"]} if out.get("JobArn") else None,
        "GetModelCustomizationJob", lambda job: {"jobIdentifier": job["JobArn"]},
        _status(("Status",), "Completed", ("Failed", "Stopped")),
        "StopModelCustomizationJob", lambda job: {"jobIdentifier": job["JobArn"]},
        ("GetModelCustomizationJob", ())),
    ("mediaconvert", "createJob"): Job(
        "mediaconvert", lambda given, out: {"Id": out["Job"]["Id"]} if (out.get("Job") or {}).get("Id") else None,
        "GetJob", lambda job: {"Id": job["Id"]}, _status(("Job", "Status"), "COMPLETE", ("ERROR", "CANCELED")),
        "CancelJob", lambda job: {"Id": job["Id"]}, ("GetJob", ())),
}


def handle(kind: str, action: str, given: Any, output: Any) -> dict | None:
    """What polling the job a start call answered with needs, or None when the answer holds no job."""
    job = JOBS.get((kind, action))
    if job is None or not isinstance(output, dict):
        return None
    found = job.handle(given if isinstance(given, dict) else {}, output)
    return {**found, "Started": output} if found is not None and job.answers_start else found


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
        if job.gone_is_done and detail.get("Code") in _GONE:
            return AttemptSucceeded(dumps(handle_.get("Started", {})))
        return AttemptFailed(TASK_FAILED, f"The job could not be followed: {job.describe} was refused with "
                                          f"{detail.get('Code')}: {detail.get('Message')}")
    except BotoCoreError:
        return AttemptPolled(number)  # no answer (the network, a timeout): the next poll tries again
    operation = catalogue.by_botocore_name(job.service).model.operation_model(job.describe)
    status, result = job.progress(shapes.response(operation.output_shape, raw))
    if status == RUNNING:
        return AttemptPolled(number)
    if status == SUCCEEDED:
        return AttemptSucceeded(dumps(handle_.get("Started", {}) if job.answers_start else result))
    return AttemptFailed(TASK_FAILED, dumps(result))


_GONE = frozenset({"ResourceNotFoundException", "ResourceNotFound", "NotFoundException"})
_THROTTLED = frozenset({"Throttling", "ThrottlingException", "ThrottledException", "TooManyRequestsException",
                        "RequestLimitExceeded", "RequestThrottled", "SlowDown"})


def _passing(error: ClientError) -> bool:
    """Whether a refused describe call may succeed when tried again: throttled, or the service's own failure."""
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 500)
    return status >= 500 or status == 429 or error.response.get("Error", {}).get("Code") in _THROTTLED


def stop(kind: str, action: str, handle_: dict, client: Any, number: int) -> None:
    """Stop the job (blocking); a job that already ended, or a refusal, is left as it is, and so is one Step
    Functions does not stop (a cluster)."""
    job = JOBS[(kind, action)]
    if job.stop is not None and job.stop_params is not None:
        getattr(client, xform_name(job.stop))(**job.stop_params(handle_))
