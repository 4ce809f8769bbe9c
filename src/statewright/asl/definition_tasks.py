"""The definition parser's Task states: the Resource (an activity, a Lambda function, an optimized integration
and its pattern, an aws-sdk call, an HTTP endpoint), what the state machine's type allows of it, Credentials, and the
HTTP task's fields, checked as AWS checks them.

A mixin of ``definition._Parser``: its methods use the parser's reporting and helpers and are reached only through
it. Must not import ``definition`` (which imports this).
"""

from __future__ import annotations

import re

from .diagnostics import INVALID_RESOURCE, expected, one_of, only_one
from .jsonata import is_expression
from .states import TaskState

_HTTP_METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD")
_ACTIVITY_ARN = re.compile(r"^arn:aws[a-z-]*:states:[a-z0-9-]+:\d{12}:activity:[^:]+$")
_SERVICE_ARN = re.compile(r"^arn:aws[a-z-]*:states:::(?P<service>[a-zA-Z0-9-]+):(?P<action>[a-zA-Z0-9]+)"
                          r"(?:\.(?P<pattern>sync(?::2)?|waitForTaskToken))?$")
LAMBDA_FUNCTION = "lambdaFunction"  # TaskState.integration of a Task whose Resource is a Lambda function's ARN
_SDK_ARN = re.compile(r"^arn:aws[a-z-]*:states:::aws-sdk:(?P<service>[a-z0-9]+):(?P<action>[a-zA-Z0-9]+)"
                      r"(?:\.(?P<pattern>waitForTaskToken))?$")
_LAMBDA_ARN = re.compile(r"^arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:function:[a-zA-Z0-9_-]+(?::[a-zA-Z0-9_$-]+)?$")
# Every optimized integration AWS lists, with the patterns each allows ("" is request-response), from AWS's page on
# each service and its summary table; where the table says more than a page (a callback for Bedrock and EKS), the
# table is followed for the calls a callback can follow (a model's invocation or customization, a Job, a call to a
# cluster), so that a definition AWS takes runs here. aws-sdk resources allow "" and waitForTaskToken.
_PLAIN = {""}
_CALLBACK = {"", "waitForTaskToken"}
_JOB = {"", "sync"}
_JOB_OR_CALLBACK = {"", "sync", "waitForTaskToken"}


def _service(service: str, plain: str = "", jobs: str = "", callbacks: str = "") -> dict[tuple[str, str], set[str]]:
    return {**{(service, action): _PLAIN for action in plain.split()},
            **{(service, action): _JOB for action in jobs.split()},
            **{(service, action): _CALLBACK for action in callbacks.split()}}


_INTEGRATIONS: dict[tuple[str, str], set[str]] = {
    ("http", "invoke"): _PLAIN, ("states", "startExecution"): {"", "sync", "sync:2", "waitForTaskToken"},
    ("ecs", "runTask"): _JOB_OR_CALLBACK,
    **_service("lambda", callbacks="invoke"), **_service("sqs", callbacks="sendMessage"),
    **_service("sns", callbacks="publish"), **_service("events", callbacks="putEvents"),
    **_service("apigateway", callbacks="invoke"),
    **_service("dynamodb", plain="getItem putItem updateItem deleteItem"),
    **_service("batch", jobs="submitJob"), **_service("glue", jobs="startJobRun"),
    **_service("databrew", jobs="startJobRun"), **_service("mediaconvert", jobs="createJob"),
    **_service("athena", plain="stopQueryExecution getQueryExecution getQueryResults", jobs="startQueryExecution"),
    **_service("codebuild", plain="stopBuild batchDeleteBuilds batchGetReports stopBuildBatch deleteBuildBatch",
               jobs="startBuild startBuildBatch retryBuildBatch"),
    **_service("sagemaker", plain="createEndpoint createEndpointConfig createModel updateEndpoint",
               jobs="createHyperParameterTuningJob createLabelingJob createProcessingJob createTrainingJob "
                    "createTransformJob"),
    **_service("elasticmapreduce", plain="setClusterTerminationProtection cancelStep modifyInstanceFleetByName "
                                         "modifyInstanceGroupByName", jobs="createCluster terminateCluster addStep"),
    **_service("emr-containers", plain="createVirtualCluster", jobs="deleteVirtualCluster startJobRun"),
    **_service("emr-serverless", jobs="createApplication startApplication stopApplication deleteApplication "
                                      "startJobRun cancelJobRun"),
    **_service("eks", callbacks="call", jobs="createCluster deleteCluster createFargateProfile "
                                              "deleteFargateProfile createNodegroup deleteNodegroup"),
    ("eks", "runJob"): _JOB_OR_CALLBACK,
    **_service("bedrock", callbacks="invokeModel"), ("bedrock", "createModelCustomizationJob"): _JOB_OR_CALLBACK,
}
NOT_RECOGNIZED = "is not recognized. The value is not a valid resource ARN, or the resource is not available in " \
                 "this region."


class TaskParsing:
    """Task states: a mixin of the definition parser, whose reporting and field helpers its methods use."""

    def task(self, name: str, raw: dict, where: str) -> TaskState:
        state = TaskState(name, "Task")
        self.result_fields(state, raw, where)
        state.parameters = self.template(raw, "Parameters", where)
        self.credentials(state, raw, where)
        state.timeout_seconds, state.timeout_seconds_path = self.seconds(raw, "TimeoutSeconds", where)
        state.heartbeat_seconds, state.heartbeat_seconds_path = self.seconds(raw, "HeartbeatSeconds", where)
        if (state.heartbeat_seconds is not None and state.timeout_seconds is not None
                and state.heartbeat_seconds >= state.timeout_seconds):
            self.schema("The value of the field 'HeartbeatSeconds' must be smaller than the value of the field "
                        "'TimeoutSeconds'", f"{where}/HeartbeatSeconds")
        if "Resource" not in raw:
            self.schema("These fields are required: [Resource]", where)
            return state
        resource = raw["Resource"]
        if not isinstance(resource, str):
            self.schema(expected("STRING"), f"{where}/Resource")
            return state
        state.resource = resource
        service = _SERVICE_ARN.match(resource)
        sdk = _SDK_ARN.match(resource)
        if _ACTIVITY_ARN.match(resource):
            state.integration = "activity"
        elif _LAMBDA_ARN.match(resource):  # the legacy form: recorded as LambdaFunction* events, not Task* ones
            state.integration, state.action = LAMBDA_FUNCTION, resource
        elif sdk:
            state.integration, state.action = f"aws-sdk:{sdk['service']}", sdk["action"]
            state.pattern = sdk["pattern"] or ""
            self.check_resource(state, raw, where)
        elif service and (service["service"], service["action"]) in _INTEGRATIONS:
            state.integration, state.action = service["service"], service["action"]
            state.pattern = service["pattern"] or ""
            if state.pattern not in _INTEGRATIONS[(state.integration, state.action)]:
                self.problem(INVALID_RESOURCE, f"The resource '{resource}' does not support the "
                             f"'.{state.pattern}' pattern", f"{where}/Resource")
            if state.integration == "http":
                self.http_parameters(raw, where)
            elif state.integration != "states":
                self.check_resource(state, raw, where)
        else:
            self.schema(f"The resource provided {resource} {NOT_RECOGNIZED}", f"{where}/Resource")
        if self.express:
            self.express_resource(state, where)
        return state

    def express_resource(self, state: TaskState, where: str) -> None:
        """What an EXPRESS state machine cannot wait for: an activity worker, a .sync job or a task token (its
        execution lasts five minutes at most and keeps no history to wait in). AWS's wording."""
        if state.integration == "activity":
            self.schema("Express state machine does not support Activity ARN", f"{where}/Resource")
        elif state.pattern in ("sync", "sync:2", "waitForTaskToken"):
            self.schema(f"Express state machine does not support '.{state.pattern}' service integration.",
                        f"{where}/Resource")

    def check_resource(self, state: TaskState, raw: dict, where: str) -> None:
        """An AWS resource and the names of its literal parameters, against the SDK's model (``resource_check``)."""
        if self.resource_check is None:
            return
        key = "Arguments" if self.language == "JSONata" else "Parameters"
        given = raw.get(key, {})
        names = ({name[:-2] if name.endswith(".$") and key == "Parameters" else name for name in given}
                 if isinstance(given, dict) else None)
        literal = ({name: value for name, value in given.items()
                    if not (key == "Parameters" and name.endswith(".$")) and not is_expression(value)}
                   if isinstance(given, dict) else {})
        for field_name, message in self.resource_check(state.integration, state.action, state.pattern, names,
                                                       literal):
            self.schema(message, f"{where}/{key if field_name == 'Parameters' else field_name}")

    def credentials(self, state: TaskState, raw: dict, where: str) -> None:
        """Credentials: the role the Task's call is made as ({"RoleArn": ...} or {"RoleArn.$": path})."""
        if "Credentials" not in raw:
            return
        value = raw["Credentials"]
        if not isinstance(value, dict):
            self.schema(expected("OBJECT"), f"{where}/Credentials")
            return
        allowed = {"RoleArn"} if self.language == "JSONata" else {"RoleArn", "RoleArn.$"}
        for key in value:
            if key not in allowed:
                self.schema(f"The field '{key}' is not supported by Step Functions", f"{where}/Credentials")
        given = [key for key in value if key in allowed]
        if not given:
            self.schema("These fields are required: [RoleArn]", f"{where}/Credentials")
        elif len(given) > 1:
            self.schema(only_one(given), f"{where}/Credentials")
        elif len(value) == 1 and self.language == "JSONPath":
            state.credentials = self.template(raw, "Credentials", where)

    def http_parameters(self, raw: dict, where: str) -> None:
        """The HTTP Task's fields that can be checked before it runs (literal Parameters or Arguments only)."""
        key = "Arguments" if self.language == "JSONata" else "Parameters"
        parameters = raw.get(key)
        if isinstance(parameters, str) and is_expression(parameters):
            return  # the whole input is computed when the task runs
        if parameters is None:
            return  # reported when it runs (a missing input is not always a definition error elsewhere)
        if not isinstance(parameters, dict):
            self.schema(expected("OBJECT"), f"{where}/{key}")
            return
        given = {name[:-2] if name.endswith(".$") else name for name in parameters}
        missing = [name for name in ("ApiEndpoint", "Method") if name not in given]
        if "Authentication" not in given and "InvocationConfig" not in given:
            missing.append("Authentication")
        if missing:
            self.schema(f"These fields are required: [{', '.join(missing)}]", f"{where}/{key}")
        method = parameters.get("Method")
        if isinstance(method, str) and not is_expression(method) and method not in _HTTP_METHODS:
            self.schema(one_of(list(_HTTP_METHODS)), f"{where}/{key}/Method")
