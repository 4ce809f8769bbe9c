"""Every optimized integration AWS lists, as one table: the botocore call each makes, how its errors are named, and
where Step Functions' request or result differs from the API's.

Most are the API's own request and result in PascalCase (``shapes``). The differences, from AWS's page on each
integration: EMR takes one ``ClusterId`` and one step, group or fleet where its API takes lists and ids
(``addStep``, ``cancelStep``, ``terminateCluster``, ``setClusterTerminationProtection``, the ``...ByName`` calls,
which find the id by name first) and answers ``ClusterId`` for ``JobFlowId``; ``createCluster`` must keep the
cluster alive and may not carry steps; EMR Serverless answers ``ApplicationId`` where its API answers nothing;
Glue adds the ``JobName`` to StartJobRun's answer; MediaConvert's jobs are tagged ``ManagedByService``; Bedrock's
``invokeModel`` body is JSON both ways. The patterns each integration allows are the definition parser's
(``asl/definition_tasks.py``); the ``.sync`` jobs are ``jobs``.

Error names are ``<prefix>.<Exception>``. The older integrations (Lambda, SQS, SNS, DynamoDB, EventBridge, Batch,
ECS, Glue, Athena, CodeBuild, SageMaker, EMR) run on the AWS SDK for Java 1.x: the service's own exception class
for an error its model does not list (``SageMaker.AmazonSageMakerException``, as AWS's SageMaker page names it),
1.x's cause text and ``SdkHttpMetadata`` in the result. Inferred, not verified against AWS: that the integrations
added since 2020 (EKS, EMR on EKS, EMR Serverless, Glue DataBrew, Bedrock, MediaConvert) write 2.x's cause text
and no ``SdkHttpMetadata``; their prefixes; the result of a Serverless application call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ...asl.jsonio import loads
from .shapes import ParameterError

Params = dict[str, Any]
ClientFor = Callable[[str], Any]  # botocore's name of a service -> a client of it, made as the call is made


@dataclass(frozen=True)
class Optimized:
    """One optimized integration: the botocore call it makes and how its answer and errors read."""

    service: str  # botocore's name
    operation: str
    prefix: str  # error names: <prefix>.<Exception>
    generic: str  # the service's own exception class, for an error its model does not list
    sdk_name: str  # the service in error texts
    json_fields: tuple[str, ...] = ()  # a JSON value given for one of these is sent as its text
    v1: bool = True  # the AWS SDK for Java 1.x's cause text
    metadata: bool = True  # SdkHttpMetadata and SdkResponseMetadata in the result
    # Where Step Functions' request differs from the API's: the fields it takes (what a definition is checked
    # against) and the API's parameters made from them (both PascalCase).
    fields: tuple[str, ...] | None = None
    request: Callable[[Params], Params] | None = None
    # The request made with calls of its own first (EMR's ...ByName calls find an id by name): (the Task's
    # parameters, clients) -> the API's parameters.
    prepare: Callable[[Params, ClientFor], Params] | None = None
    # (the Task's parameters, the API's answer, clients) -> the Task's result
    result: Callable[[Params, Params, ClientFor], Params] | None = None


def _v1(service: str, operation: str, prefix: str, java: str, **options: Any) -> Optimized:
    return Optimized(service, operation, prefix, f"{java}Exception", java, **options)


def _v2(service: str, operation: str, prefix: str, java: str, **options: Any) -> Optimized:
    return Optimized(service, operation, prefix, f"{prefix}Exception", java, v1=False, metadata=False, **options)


def _actions(service: str, prefix: str, java: str, actions: list[str], maker: Callable[..., Optimized] = _v1
             ) -> dict[tuple[str, str], Optimized]:
    return {(service, action): maker(service, action[0].upper() + action[1:], prefix, java) for action in actions}


# EMR: one cluster, step, group or fleet where the API takes lists.
def _create_cluster(given: Params) -> Params:
    _refuse_broken("createCluster", given)
    return given


def _refuse_broken(action: str, given: Params) -> None:
    """EMR's rules, checked again as the Task runs (its parameters may have been computed)."""
    problems = emr_problems(action, given, given)
    if problems:
        raise ParameterError(problems[0])


def _without(given: Params, *names: str) -> Params:
    return {key: value for key, value in given.items() if key not in names}


def emr_problems(action: str, names: Any, literal: dict[str, Any]) -> list[str]:
    """What EMR's parameters written literally break of Step Functions' rules (refused when the state machine is
    created, and checked again as it runs)."""
    problems = []
    if action == "createCluster":
        if names is not None and "Steps" in names:
            problems.append("The field 'Steps' is not supported by Step Functions: add steps with emr:addStep")
        instances = literal.get("Instances")
        kept = instances.get("KeepJobFlowAliveWhenNoSteps", False) if isinstance(instances, dict) else True
        computed = (isinstance(kept, str) and kept.lstrip().startswith("{%")) or (
            isinstance(instances, dict) and "KeepJobFlowAliveWhenNoSteps.$" in instances)
        if kept is not True and not computed:
            problems.append("Instances.KeepJobFlowAliveWhenNoSteps must be true: Step Functions adds steps with "
                            "emr:addStep")
    for kind in ("Group", "Fleet"):
        given = literal.get(f"Instance{kind}")
        if action == f"modifyInstance{kind}ByName" and isinstance(given, dict) and f"Instance{kind}Id" in given:
            problems.append(f"The field 'Instance{kind}.Instance{kind}Id' is not supported by Step Functions: the "
                            f"instance {kind.lower()} is found by its Instance{kind}Name")
    return problems


def _by_name(kind: str) -> Callable[[Params, ClientFor], Params]:
    """EMR's modifyInstance{kind}ByName: the group's or fleet's id found by its name (List Instance{kind}s), then
    the API's request (ModifyInstanceGroups takes a list of groups, ModifyInstanceFleet one fleet)."""
    def prepare(given: Params, client_for: ClientFor) -> Params:
        _refuse_broken(f"modifyInstance{kind}ByName", given)
        cluster, name = given.get("ClusterId"), given.get(f"Instance{kind}Name")
        listed = getattr(client_for("emr"), f"list_instance_{kind.lower()}s")(ClusterId=cluster)
        found = [item["Id"] for item in listed.get(f"Instance{kind}s", []) if item.get("Name") == name]
        if len(found) != 1:
            raise ParameterError(f"The cluster {cluster} has {'no' if not found else 'more than one'} instance "
                                 f"{kind.lower()} named {name!r}")
        changed = {**(given.get(f"Instance{kind}") or {}), f"Instance{kind}Id": found[0]}
        return {"ClusterId": cluster, **({"InstanceGroups": [changed]} if kind == "Group" else
                                         {"InstanceFleet": changed})}
    return prepare


_EMR_V1 = ("EMR", "AmazonElasticMapReduce")
EMR: dict[tuple[str, str], Optimized] = {
    ("elasticmapreduce", "createCluster"): _v1(
        "emr", "RunJobFlow", *_EMR_V1, request=_create_cluster,
        result=lambda given, out, _: {"ClusterId": out.get("JobFlowId"), **_without(out, "JobFlowId")}),
    ("elasticmapreduce", "setClusterTerminationProtection"): _v1(
        "emr", "SetTerminationProtection", *_EMR_V1, fields=("ClusterId", "TerminationProtected"),
        request=lambda given: {"JobFlowIds": [given.get("ClusterId")],
                               **_without(given, "ClusterId")}),
    ("elasticmapreduce", "terminateCluster"): _v1(
        "emr", "TerminateJobFlows", *_EMR_V1, fields=("ClusterId",),
        request=lambda given: {"JobFlowIds": [given.get("ClusterId")]}),
    ("elasticmapreduce", "addStep"): _v1(
        "emr", "AddJobFlowSteps", *_EMR_V1, fields=("ClusterId", "Step", "ExecutionRoleArn"),
        request=lambda given: {"JobFlowId": given.get("ClusterId"), "Steps": [given.get("Step")],
                               **_without(given, "ClusterId", "Step")},
        result=lambda given, out, _: {"StepId": (out.get("StepIds") or [None])[0], **_without(out, "StepIds")}),
    ("elasticmapreduce", "cancelStep"): _v1(
        "emr", "CancelSteps", *_EMR_V1, fields=("ClusterId", "StepId", "StepCancellationOption"),
        request=lambda given: {"StepIds": [given.get("StepId")], **_without(given, "StepId")},
        result=lambda given, out, _: {"CancelStepsInfo": (out.get("CancelStepsInfoList") or [None])[0],
                                   **_without(out, "CancelStepsInfoList")}),
    ("elasticmapreduce", "modifyInstanceFleetByName"): _v1(
        "emr", "ModifyInstanceFleet", *_EMR_V1, fields=("ClusterId", "InstanceFleetName", "InstanceFleet"),
        prepare=_by_name("Fleet")),
    ("elasticmapreduce", "modifyInstanceGroupByName"): _v1(
        "emr", "ModifyInstanceGroups", *_EMR_V1, fields=("ClusterId", "InstanceGroupName", "InstanceGroup"),
        prepare=_by_name("Group")),
}


def _application(given: Params, out: Params, _: ClientFor) -> Params:
    """EMR Serverless's Start/Stop/DeleteApplication answer nothing; Step Functions answers the application."""
    return {"ApplicationId": given.get("ApplicationId"), **out}


class OtherServiceFailed(Exception):
    """A call of another service an integration makes (Bedrock's S3 input or output) was refused: its error is
    named as that service's (``S3.NoSuchKeyException``)."""

    def __init__(self, service: str, error: ClientError) -> None:
        super().__init__(service, error)
        self.service, self.error = service, error


def _s3(client_for: ClientFor, operation: str, **params: Any) -> Any:
    try:
        return getattr(client_for("s3"), operation)(**params)
    except ClientError as error:
        raise OtherServiceFailed("s3", error) from None


def _s3_location(where: Any, field_name: str) -> tuple[str, str]:
    uri = where.get("S3Uri") if isinstance(where, dict) else None
    if not isinstance(uri, str) or not uri.startswith("s3://") or "/" not in uri[5:]:
        raise ParameterError(f"The field '{field_name}.S3Uri' must be an S3 object's URI (s3://bucket/key)")
    bucket, key = uri[5:].split("/", 1)
    return bucket, key


def _model_input(given: Params, client_for: ClientFor) -> Params:
    """Bedrock's invokeModel: the body given, or read from ``Input``'s S3 object (whose content type is the
    request's unless it names one)."""
    params = _without(given, "Input", "Output")
    if "Input" in given:
        if "Body" in given:
            raise ParameterError("Give either 'Body' or 'Input', not both")
        bucket, key = _s3_location(given["Input"], "Input")
        found = _s3(client_for, "get_object", Bucket=bucket, Key=key)
        params["Body"] = found["Body"].read().decode("utf-8", errors="replace")
        if "ContentType" not in params and found.get("ContentType"):
            params["ContentType"] = found["ContentType"]
    return params


def _model_output(given: Params, out: Params, client_for: ClientFor) -> Params:
    """Bedrock's invokeModel: a JSON body as JSON; with ``Output``, the body written to that S3 object and replaced
    by a reference to it (AWS's Bedrock page; the reference's form is inferred)."""
    body = out.get("Body", "")
    if "Output" in given:
        bucket, key = _s3_location(given["Output"], "Output")
        _s3(client_for, "put_object", Bucket=bucket, Key=key, Body=body.encode())
        return {**out, "Body": {"S3Uri": f"s3://{bucket}/{key}"}}
    try:
        return {**out, "Body": loads(body)}
    except ValueError:
        return out


_SQS = ("sqs", "SendMessage", "SQS", "AmazonSQSException", "AmazonSQS")
_DYNAMODB = ("DynamoDB", "AmazonDynamoDBException", "AmazonDynamoDBv2")
OPTIMIZED: dict[tuple[str, str], Optimized] = {
    ("sqs", "sendMessage"): Optimized(*_SQS, json_fields=("MessageBody",)),
    ("sns", "publish"): Optimized("sns", "Publish", "SNS", "AmazonSNSException", "AmazonSNS", json_fields=("Message",)),
    # PutEvents' result carries no SdkHttpMetadata (AWS's recordings)
    ("events", "putEvents"): Optimized("events", "PutEvents", "EventBridge", "AmazonEventBridgeException",
                                       "AmazonEventBridge", metadata=False),
    ("lambda", "invoke"): Optimized("lambda", "Invoke", "Lambda", "AWSLambdaException", "AWSLambda",
                                    json_fields=("Payload",)),
    **{("dynamodb", action): Optimized("dynamodb", action[0].upper() + action[1:], *_DYNAMODB)
       for action in ("getItem", "putItem", "updateItem", "deleteItem")},
    ("batch", "submitJob"): _v1("batch", "SubmitJob", "Batch", "AWSBatch"),
    ("ecs", "runTask"): _v1("ecs", "RunTask", "ECS", "AmazonECS"),
    ("glue", "startJobRun"): _v1("glue", "StartJobRun", "Glue", "AWSGlue",
                                 result=lambda given, out, _: {"JobName": given.get("JobName"), **out}),
    **_actions("athena", "Athena", "AmazonAthena",
               ["startQueryExecution", "stopQueryExecution", "getQueryExecution", "getQueryResults"]),
    **_actions("codebuild", "CodeBuild", "AWSCodeBuild",
               ["startBuild", "stopBuild", "batchDeleteBuilds", "batchGetReports", "startBuildBatch",
                "stopBuildBatch", "retryBuildBatch", "deleteBuildBatch"]),
    **_actions("sagemaker", "SageMaker", "AmazonSageMaker",
               ["createEndpoint", "createEndpointConfig", "createHyperParameterTuningJob", "createLabelingJob",
                "createModel", "createProcessingJob", "createTrainingJob", "createTransformJob",
                "updateEndpoint"]),
    **EMR,
    **_actions("emr-containers", "EMRContainers", "EmrContainers",
               ["createVirtualCluster", "deleteVirtualCluster", "startJobRun"], _v2),
    **_actions("emr-serverless", "EMRServerless", "EmrServerless",
               ["createApplication", "startJobRun", "cancelJobRun"], _v2),
    **{("emr-serverless", action): _v2("emr-serverless", action[0].upper() + action[1:], "EMRServerless",
                                       "EmrServerless", result=_application)
       for action in ("startApplication", "stopApplication", "deleteApplication")},
    **_actions("eks", "EKS", "Eks", ["createCluster", "deleteCluster", "createFargateProfile",
                                     "deleteFargateProfile", "createNodegroup", "deleteNodegroup"], _v2),
    **_actions("databrew", "DataBrew", "DataBrew", ["startJobRun"], _v2),
    ("bedrock", "invokeModel"): _v2(
        "bedrock-runtime", "InvokeModel", "Bedrock", "BedrockRuntime", json_fields=("Body",),
        fields=("ModelId", "Body", "ContentType", "Accept", "Trace", "GuardrailIdentifier", "GuardrailVersion",
                "PerformanceConfigLatency", "Input", "Output"), prepare=_model_input, result=_model_output),
    ("bedrock", "createModelCustomizationJob"): _v2("bedrock", "CreateModelCustomizationJob", "Bedrock", "Bedrock"),
    ("mediaconvert", "createJob"): _v2(
        "mediaconvert", "CreateJob", "MediaConvert", "MediaConvert",
        request=lambda given: {**given, "Tags": {**(given.get("Tags") or {}),
                                                 "ManagedByService": "AWSStepFunctions"}}),
}
LAMBDA = OPTIMIZED[("lambda", "invoke")]
