"""Every optimized integration AWS lists, through boto3 against a real server whose AWS is moto's: request-response
calls and .sync jobs of SageMaker, EMR, EMR on EKS, EMR Serverless, EKS, Bedrock and Athena, API Gateway against a
stand-in API, and TestState mocks checked STRICT for the ones moto does not run (Glue DataBrew, MediaConvert,
CodeBuild's build batches, SageMaker's labeling jobs)."""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from botocore.exceptions import ClientError

from aws import ACCOUNT, aws_client, output, run, server_env, task
from server import ROLE_ARN, ServerProcess


@pytest.fixture
def sfn(aws_server):
    return aws_server.client()


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _types(described: dict) -> list[str]:
    return [event["type"] for event in described["events"]]


def test_sagemaker_training_job_sync_waits_for_the_job_and_returns_its_description(sfn):
    name = _name("train")
    described = run(sfn, task("arn:aws:states:::sagemaker:createTrainingJob.sync", {
        "TrainingJobName": name, "RoleArn": ROLE_ARN,
        "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"},
        "OutputDataConfig": {"S3OutputPath": "s3://bucket/out"},
        "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 60}}))
    result = output(described)
    assert result["TrainingJobName"] == name and result["TrainingJobStatus"] == "Completed"
    assert _types(described)[2:6] == ["TaskScheduled", "TaskStarted", "TaskSubmitted", "TaskSucceeded"]
    submitted = next(e for e in described["events"] if e["type"] == "TaskSubmitted")["taskSubmittedEventDetails"]
    assert json.loads(submitted["output"])["TrainingJobArn"].endswith(f"training-job/{name}")


@pytest.mark.parametrize(("kind", "parameters"), [
    ("Transform", {"ModelName": "m", "TransformInput": {"DataSource": {"S3DataSource": {
        "S3DataType": "S3Prefix", "S3Uri": "s3://b/i"}}}, "TransformOutput": {"S3OutputPath": "s3://b/o"},
        "TransformResources": {"InstanceType": "ml.m5.large", "InstanceCount": 1}}),
    ("Processing", {"ProcessingResources": {"ClusterConfig": {"InstanceCount": 1, "InstanceType": "ml.m5.large",
                                                              "VolumeSizeInGB": 1}},
                    "AppSpecification": {"ImageUri": "img"}, "RoleArn": ROLE_ARN}),
    ("HyperParameterTuning", {"HyperParameterTuningJobConfig": {"Strategy": "Bayesian", "ResourceLimits": {
        "MaxParallelTrainingJobs": 1}}}),
])
def test_each_sagemaker_job_sync_waits_for_its_describe_to_complete(sfn, kind, parameters):
    name = _name(kind.lower()[:10])
    result = output(run(sfn, task(f"arn:aws:states:::sagemaker:create{kind}Job.sync",
                                  {f"{kind}JobName": name, **parameters})))
    assert result[f"{kind}JobName"] == name and result[f"{kind}JobStatus"] == "Completed"


def test_sagemaker_request_response_returns_the_api_answer_with_its_http_metadata(sfn):
    name = _name("model")
    result = output(run(sfn, task("arn:aws:states:::sagemaker:createModel", {
        "ModelName": name, "ExecutionRoleArn": ROLE_ARN, "PrimaryContainer": {"Image": "img"}})))
    assert result["ModelArn"].endswith(f"model/{name}")
    assert result["SdkHttpMetadata"]["HttpStatusCode"] == 200 and "RequestId" in result["SdkResponseMetadata"]


def test_a_sagemaker_error_is_named_as_the_java_sdk_names_it(sfn):
    described = run(sfn, task("arn:aws:states:::sagemaker:createEndpoint", {
        "EndpointName": _name("e"), "EndpointConfigName": "no-such-config"}))
    assert described["status"] == "FAILED" and described["error"].startswith("SageMaker.")
    assert "(Service: AmazonSageMaker; Status Code: " in described["cause"]


def _instances() -> dict:
    return {"KeepJobFlowAliveWhenNoSteps": True, "InstanceGroups": [
        {"Name": "primary", "InstanceRole": "MASTER", "InstanceType": "m5.xlarge", "InstanceCount": 1},
        {"Name": "workers", "InstanceRole": "CORE", "InstanceType": "m5.xlarge", "InstanceCount": 1}]}


def test_an_emr_cluster_is_created_waited_for_changed_by_name_stepped_and_terminated(sfn, moto):
    cluster = {"Name": _name("c"), "ReleaseLabel": "emr-6.9.0", "Instances": _instances(), "JobFlowRole": "r",
               "ServiceRole": "s"}
    definition = {"StartAt": "Create", "States": {
        "Create": {"Type": "Task", "Resource": "arn:aws:states:::elasticmapreduce:createCluster.sync",
                   "Parameters": cluster, "ResultPath": "$.created", "Next": "Grow"},
        "Grow": {"Type": "Task", "Resource": "arn:aws:states:::elasticmapreduce:modifyInstanceGroupByName",
                 "Parameters": {"ClusterId.$": "$.created.ClusterId", "InstanceGroupName": "workers",
                                "InstanceGroup": {"InstanceCount": 3}}, "ResultPath": None, "Next": "Step"},
        "Step": {"Type": "Task", "Resource": "arn:aws:states:::elasticmapreduce:addStep",
                 "Parameters": {"ClusterId.$": "$.created.ClusterId", "Step": {
                     "Name": "s", "HadoopJarStep": {"Jar": "command-runner.jar", "Args": ["true"]}}},
                 "ResultPath": "$.step", "Next": "Terminate"},
        "Terminate": {"Type": "Task", "Resource": "arn:aws:states:::elasticmapreduce:terminateCluster.sync",
                      "Parameters": {"ClusterId.$": "$.created.ClusterId"}, "ResultPath": None, "End": True}}}
    result = output(run(sfn, definition))
    # createCluster.sync answers createCluster's ClusterId once the cluster waits (AWS's "Manage an EMR job" sample
    # reads $.ClusterId), and terminateCluster.sync returns once it is terminated
    emr = aws_client(moto, "emr")
    assert emr.describe_cluster(ClusterId=result["created"]["ClusterId"])["Cluster"]["Status"]["State"] == \
        "TERMINATED"
    assert result["created"]["ClusterArn"].endswith(result["created"]["ClusterId"])
    assert result["step"]["StepId"].startswith("s-")
    groups = emr.list_instance_groups(ClusterId=result["created"]["ClusterId"])
    assert {group["Name"]: group["RequestedInstanceCount"] for group in groups["InstanceGroups"]} == {
        "primary": 1, "workers": 3}


def test_an_emr_cluster_not_kept_alive_is_refused_before_any_call(sfn):
    described = run(sfn, task("arn:aws:states:::elasticmapreduce:createCluster", {
        "Name": "c", "ReleaseLabel": "emr-6.9.0", "Instances.$": "$.instances", "JobFlowRole": "r",
        "ServiceRole": "s"}), {"instances": {"KeepJobFlowAliveWhenNoSteps": False}})
    assert described["status"] == "FAILED" and described["error"] == "States.Runtime"
    assert "KeepJobFlowAliveWhenNoSteps must be true" in described["cause"]


def test_an_instance_group_that_is_not_there_fails_the_task_saying_so(sfn, moto):
    cluster = aws_client(moto, "emr").run_job_flow(Name="c", ReleaseLabel="emr-6.9.0", Instances=_instances(),
                                                   JobFlowRole="r", ServiceRole="s")["JobFlowId"]
    described = run(sfn, task("arn:aws:states:::elasticmapreduce:modifyInstanceGroupByName", {
        "ClusterId": cluster, "InstanceGroupName": "nobody", "InstanceGroup": {"InstanceCount": 2}}))
    assert described["status"] == "FAILED" and "no instance group named 'nobody'" in described["cause"]


def test_emr_serverless_application_and_job_run_are_followed_to_their_states(sfn, moto):
    definition = {"StartAt": "Create", "States": {
        "Create": {"Type": "Task", "Resource": "arn:aws:states:::emr-serverless:createApplication.sync",
                   "Parameters": {"Name": _name("app"), "ReleaseLabel": "emr-6.6.0", "Type": "SPARK"},
                   "ResultSelector": {"Id.$": "$.ApplicationId"}, "ResultPath": "$.app",
                   "Next": "Run"},
        "Run": {"Type": "Task", "Resource": "arn:aws:states:::emr-serverless:startJobRun.sync",
                "Parameters": {"ApplicationId.$": "$.app.Id", "ExecutionRoleArn": ROLE_ARN, "ClientToken": "t"},
                "ResultSelector": {"JobRunId.$": "$.JobRunId"}, "ResultPath": "$.run", "Next": "Stop"},
        "Stop": {"Type": "Task", "Resource": "arn:aws:states:::emr-serverless:stopApplication",
                 "Parameters": {"ApplicationId.$": "$.app.Id"}, "ResultPath": "$.stopped", "End": True}}}
    result = output(run(sfn, definition))
    # each .sync answers its call's own answer, once the application or run reached its state (AWS's page)
    run_state = aws_client(moto, "emr-serverless").get_job_run(applicationId=result["app"]["Id"],
                                                               jobRunId=result["run"]["JobRunId"])
    assert run_state["jobRun"]["state"] == "SUCCESS"
    assert result["stopped"] == {"ApplicationId": result["app"]["Id"]}  # Step Functions' answer, not the API's {}


def test_emr_on_eks_job_run_is_started_and_cancelled(sfn, moto):
    containers = aws_client(moto, "emr-containers")
    cluster = containers.create_virtual_cluster(name="v", containerProvider={
        "type": "EKS", "id": "eks", "info": {"eksInfo": {"namespace": _name("ns")}}})["id"]
    definition = {"StartAt": "Run", "States": {
        "Run": {"Type": "Task", "Resource": "arn:aws:states:::emr-containers:startJobRun", "ResultPath": "$.run",
                "Parameters": {"VirtualClusterId": cluster, "ExecutionRoleArn": ROLE_ARN,
                               "ReleaseLabel": "emr-6.3.0-latest", "ClientToken": "t",
                               "JobDriver": {"SparkSubmitJobDriver": {"EntryPoint": "s3://b/job.py"}}},
                "Next": "Cancel"},
        "Cancel": {"Type": "Task", "Resource": "arn:aws:states:::aws-sdk:emrcontainers:cancelJobRun",
                   "Parameters": {"VirtualClusterId": cluster, "Id.$": "$.run.Id"}, "End": True}}}
    result = output(run(sfn, definition))
    assert result["VirtualClusterId"] == cluster and result["Id"]


def test_emr_on_eks_virtual_cluster_is_created_and_deleted_to_terminated(sfn):
    definition = {"StartAt": "Create", "States": {
        "Create": {"Type": "Task", "Resource": "arn:aws:states:::emr-containers:createVirtualCluster",
                   "Parameters": {"Name": "v", "ContainerProvider": {"Type": "EKS", "Id": "eks", "Info": {
                       "EksInfo": {"Namespace": _name("ns")}}}}, "ResultPath": "$.cluster", "Next": "Delete"},
        "Delete": {"Type": "Task", "Resource": "arn:aws:states:::emr-containers:deleteVirtualCluster.sync",
                   "Parameters": {"Id.$": "$.cluster.Id"},
                   "ResultSelector": {"State.$": "$.VirtualCluster.State"}, "End": True}}}
    assert output(run(sfn, definition)) == {"State": "TERMINATED"}


def test_eks_cluster_created_to_active_and_its_node_group_deleted_until_gone(sfn):
    name = _name("k")
    definition = {"StartAt": "Cluster", "States": {
        "Cluster": {"Type": "Task", "Resource": "arn:aws:states:::eks:createCluster.sync",
                    "Parameters": {"Name": name, "RoleArn": ROLE_ARN, "ResourcesVpcConfig": {"SubnetIds": ["s"]}},
                    "ResultSelector": {"Status.$": "$.Cluster.Status"}, "ResultPath": "$.cluster",
                    "Next": "Nodes"},
        "Nodes": {"Type": "Task", "Resource": "arn:aws:states:::eks:createNodegroup.sync",
                  "Parameters": {"ClusterName": name, "NodegroupName": "n", "Subnets": ["s"], "NodeRole": ROLE_ARN},
                  "ResultSelector": {"Status.$": "$.Nodegroup.Status"}, "ResultPath": "$.nodes",
                  "Next": "Drop"},
        "Drop": {"Type": "Task", "Resource": "arn:aws:states:::eks:deleteNodegroup.sync",
                 "Parameters": {"ClusterName": name, "NodegroupName": "n"},
                 "ResultSelector": {"Name.$": "$.Nodegroup.NodegroupName"}, "ResultPath": "$.dropped",
                 "End": True}}}
    result = output(run(sfn, definition))
    assert result["cluster"] == {"Status": "ACTIVE"} and result["nodes"] == {"Status": "ACTIVE"}
    assert result["dropped"] == {"Name": "n"}  # the delete call's answer, once describe says it is gone


def test_bedrock_invoke_model_sends_json_and_reads_and_writes_s3(sfn, moto):
    s3 = aws_client(moto, "s3")
    bucket = _name("prompts")
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="in.json", Body=b'{"inputText": "hello"}', ContentType="application/json")
    model = "amazon.titan-text-express-v1"
    direct = output(run(sfn, task("arn:aws:states:::bedrock:invokeModel", {
        "ModelId": model, "Body": {"inputText": "hi"}})))
    assert isinstance(direct["Body"], dict) and direct["ContentType"] == "application/json"
    stored = output(run(sfn, task("arn:aws:states:::bedrock:invokeModel", {
        "ModelId": model, "Input": {"S3Uri": f"s3://{bucket}/in.json"}, "Output": {"S3Uri": f"s3://{bucket}/out"}})))
    assert stored["Body"] == {"S3Uri": f"s3://{bucket}/out"}
    assert json.loads(s3.get_object(Bucket=bucket, Key="out")["Body"].read()) == direct["Body"]


def test_a_bedrock_input_object_that_is_not_there_fails_as_s3_names_it(sfn):
    described = run(sfn, task("arn:aws:states:::bedrock:invokeModel", {
        "ModelId": "amazon.titan-text-express-v1", "Input": {"S3Uri": f"s3://{_name('none')}/in.json"}}))
    assert described["status"] == "FAILED" and described["error"] == "S3.NoSuchBucketException"
    assert "(Service: S3, Status Code: 404, " in described["cause"]


def test_bedrock_model_customization_job_is_started_and_named(sfn):
    result = output(run(sfn, task("arn:aws:states:::bedrock:createModelCustomizationJob", {
        "JobName": _name("j"), "CustomModelName": "m", "RoleArn": ROLE_ARN, "BaseModelIdentifier": "amazon.titan",
        "TrainingDataConfig": {"S3Uri": "s3://b/t"}, "OutputDataConfig": {"S3Uri": "s3://b/o"},
        "HyperParameters": {}})))
    assert result["JobArn"].startswith(f"arn:aws:bedrock:us-east-1:{ACCOUNT}:model-customization-job/")
    assert "SdkHttpMetadata" not in result


def test_athena_get_query_execution_is_a_request_response_call(sfn, moto):
    started = aws_client(moto, "athena").start_query_execution(
        QueryString="SELECT 1", WorkGroup="primary", ResultConfiguration={"OutputLocation": "s3://r/"})
    result = output(run(sfn, task("arn:aws:states:::athena:getQueryExecution",
                                  {"QueryExecutionId": started["QueryExecutionId"]})))
    assert result["QueryExecution"]["QueryExecutionId"] == started["QueryExecutionId"]


@pytest.mark.parametrize("resource", ["arn:aws:states:::bedrock:invokeModel.waitForTaskToken",
                                      "arn:aws:states:::eks:runJob.waitForTaskToken",
                                      "arn:aws:states:::elasticmapreduce:addStep.sync",
                                      "arn:aws:states:::codebuild:retryBuildBatch.sync"])
def test_the_patterns_aws_lists_are_taken(sfn, resource):
    """AWS's table of optimized integrations (its summary table for Bedrock's and EKS's callbacks)."""
    sfn.create_state_machine(name=_name("ok"), roleArn=ROLE_ARN, definition=json.dumps(task(resource)))


@pytest.mark.parametrize(("resource", "parameters", "says"), [
    ("arn:aws:states:::bedrock:invokeModel.sync", {"ModelId": "m"}, "does not support the '.sync' pattern"),
    ("arn:aws:states:::sagemaker:createModel.sync", {"ModelName": "m"}, "does not support the '.sync' pattern"),
    ("arn:aws:states:::eks:describeCluster", {"Name": "k"}, "is not recognized"),
    ("arn:aws:states:::elasticmapreduce:addStep", {"ClusterId": "j", "Steps": []},
     "The field 'Steps' is not supported by Step Functions"),
    ("arn:aws:states:::apigateway:invoke", {"ApiEndpoint": "x", "Method": "GET", "Body": 1},
     "The field 'Body' is not supported by Step Functions"),
    ("arn:aws:states:::mediaconvert:createJob.waitForTaskToken", {}, "does not support the '.waitForTaskToken'"),
    ("arn:aws:states:::elasticmapreduce:createCluster", {"Name": "c", "Instances": {}, "Steps": []},
     "The field 'Steps' is not supported by Step Functions"),
    ("arn:aws:states:::elasticmapreduce:createCluster", {"Name": "c", "Instances": {}},
     "Instances.KeepJobFlowAliveWhenNoSteps must be true"),
    ("arn:aws:states:::elasticmapreduce:modifyInstanceGroupByName",
     {"ClusterId": "j-1", "InstanceGroupName": "g", "InstanceGroup": {"InstanceGroupId": "ig-1"}},
     "The field 'InstanceGroup.InstanceGroupId' is not supported"),
    ("arn:aws:states:::apigateway:invoke", {"ApiEndpoint": "abc.execute-api.us-east-1.amazonaws.com",
                                            "Method": "FETCH"}, "The value of the field 'Method' must be one of"),
    ("arn:aws:states:::apigateway:invoke", {"Method": "GET"}, "The field 'ApiEndpoint' is required"),
    ("arn:aws:states:::apigateway:invoke", {"ApiEndpoint": "abc.execute-api.us-east-1.amazonaws.com",
                                            "Method": "GET", "AuthType": "IAM_AUTH"},
     "The value of the field 'AuthType' must be one of"),
    ("arn:aws:states:::apigateway:invoke", {"ApiEndpoint": "abc.execute-api.us-east-1.amazonaws.com",
                                            "Method": "GET", "Headers": {"Host": ["x"]}},
     "The 'Headers' field contains unsupported values: ['Host']"),
])
def test_a_resource_pattern_or_field_aws_does_not_take_is_refused_when_the_machine_is_created(
        sfn, resource, parameters, says):
    with pytest.raises(ClientError) as refused:
        sfn.create_state_machine(name=_name("bad"), roleArn=ROLE_ARN,
                                 definition=json.dumps(task(resource, parameters)))
    assert refused.value.response["Error"]["Code"] == "InvalidDefinition"
    assert says in refused.value.response["Error"]["Message"]


@pytest.mark.parametrize(("resource", "result", "wrong"), [
    ("arn:aws:states:::databrew:startJobRun.sync", {"Name": "j", "RunId": "r", "State": "SUCCEEDED"},
     {"State": 3}),
    ("arn:aws:states:::mediaconvert:createJob.sync", {"Job": {"Role": ROLE_ARN, "Settings": {}, "Status": "COMPLETE"}},
     {"Job": {"Status": ["COMPLETE"]}}),
    ("arn:aws:states:::codebuild:startBuildBatch.sync", {"BuildBatch": {"Id": "b:1", "BuildBatchStatus": "SUCCEEDED"}},
     {"BuildBatch": {"BuildBatchStatus": 1}}),
    ("arn:aws:states:::sagemaker:createLabelingJob.sync", {"LabelingJobStatus": "Completed"},
     {"LabelingJobStatus": "Done"}),
])
def test_test_state_checks_a_mocked_job_result_against_what_the_pattern_returns(sfn, resource, result, wrong):
    state = {"Type": "Task", "Resource": resource, "End": True}
    answer = sfn.test_state(definition=json.dumps(state), input="{}",
                            mock={"result": json.dumps(result), "fieldValidationMode": "PRESENT"})
    assert answer["status"] == "SUCCEEDED" and json.loads(answer["output"]) == result
    refused = pytest.raises(ClientError)
    with refused:
        sfn.test_state(definition=json.dumps(state), input="{}",
                       mock={"result": json.dumps(wrong), "fieldValidationMode": "STRICT"})
    assert "Mock result schema validation error" in refused.excinfo.value.response["Error"]["Message"]


class StandInApi:
    """An HTTP server standing in for an API deployed on API Gateway: it answers each request with what the test
    set for its path, and keeps what it received."""

    def __init__(self) -> None:
        self.received: list[dict] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                api.received.append({"method": self.command, "path": self.path, "headers": dict(self.headers),
                                     "body": body.decode()})
                status, content_type, text = (403, "application/json", '{"message":"Missing Authentication Token"}') \
                    if "forbidden" in self.path else (200, "application/json", '{"pets": [1, 2]}')
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text.encode())

            do_GET = do_POST = do_PUT = do_DELETE = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture(scope="module")
def api_gateway(tmp_path_factory, moto):
    """A server whose execute-api endpoint is a stand-in API (AWS_ENDPOINT_URL_EXECUTE_API) and whose AWS is moto."""
    api = StandInApi()
    process = ServerProcess(tmp_path_factory.mktemp("apigw") / "data",
                            env={**server_env(moto), "AWS_ENDPOINT_URL_EXECUTE_API": api.url + "/{api_id}"}).start()
    yield process.client(), api
    process.stop()
    api.server.shutdown()
    api.server.server_close()


def test_api_gateway_invoke_calls_the_stage_and_path_and_returns_the_answer(api_gateway):
    sfn, api = api_gateway
    result = output(run(sfn, task("arn:aws:states:::apigateway:invoke", {
        "ApiEndpoint": "abc123.execute-api.us-east-1.amazonaws.com", "Method": "POST", "Stage": "prod",
        "Path": "pets", "QueryParameters": {"kind": ["cat", "dog"]}, "Headers": {"X-Team": ["blue"]},
        "RequestBody": {"name": "rex", "owner": None}, "AuthType": "IAM_ROLE"})))
    assert result["StatusCode"] == 200 and result["StatusText"] == "OK"
    assert result["ResponseBody"] == {"pets": [1, 2]} and result["Headers"]["Content-Type"] == ["application/json"]
    sent = api.received[-1]
    assert sent["method"] == "POST" and sent["path"] == "/abc123/prod/pets?kind=cat&kind=dog"
    assert json.loads(sent["body"]) == {"name": "rex"}  # null fields left out without AllowNullValues
    assert sent["headers"]["X-Team"] == "blue"
    assert "/us-east-1/execute-api/aws4_request" in sent["headers"]["Authorization"]  # IAM_ROLE: SigV4-signed


def test_api_gateway_status_outside_2xx_fails_with_the_status_and_the_body(api_gateway):
    sfn, api = api_gateway
    described = run(sfn, task("arn:aws:states:::apigateway:invoke", {
        "ApiEndpoint": "abc123.execute-api.us-east-1.amazonaws.com", "Method": "GET", "Path": "forbidden"}))
    assert described["status"] == "FAILED" and described["error"] == "ApiGateway.403"
    assert described["cause"] == '{"message":"Missing Authentication Token"}'
    assert "Authorization" not in api.received[-1]["headers"]  # NO_AUTH by default


@pytest.mark.parametrize(("parameters", "says"), [
    ({"ApiEndpoint": "example.com", "Method": "GET"}, "is not an API's endpoint"),
    ({"ApiEndpoint": "abc.execute-api.us-east-1.amazonaws.com", "Method": "FETCH"}, "is not one of GET"),
    ({"ApiEndpoint": "abc.execute-api.us-east-1.amazonaws.com", "Method": "GET",
      "Headers": {"Host": ["x"]}}, "The 'Headers' field contains unsupported values: ['Host']"),
])
def test_api_gateway_parameters_computed_as_it_runs_fail_the_task_with_states_runtime(api_gateway, parameters,
                                                                                        says):
    sfn, _ = api_gateway  # given as the execution's input, they are known only as the Task runs
    described = run(sfn, task("arn:aws:states:::apigateway:invoke", {"ApiEndpoint.$": "$.ApiEndpoint",
                                                                      "Method.$": "$.Method",
                                                                      "Headers.$": "$.Headers"}),
                    {"Headers": {}, **parameters})
    assert described["status"] == "FAILED" and described["error"] == "States.Runtime"
    assert says in described["cause"]


def _certificate(directory) -> tuple[str, str, str]:
    """A self-signed certificate for 127.0.0.1: (cert file, key file, its PEM as base64, as EKS gives it)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                  critical=False)
                   .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                   .sign(key, hashes.SHA256()))
    pem = certificate.public_bytes(serialization.Encoding.PEM)
    (directory / "cert.pem").write_bytes(pem)
    (directory / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                          serialization.PrivateFormat.PKCS8,
                                                          serialization.NoEncryption()))
    return str(directory / "cert.pem"), str(directory / "key.pem"), base64.b64encode(pem).decode()


class StandInKubernetes:
    """An HTTPS server standing in for an EKS cluster's Kubernetes API: Jobs created, read (running, then ended:
    Failed when the Job's name says so), deleted; their pods listed and logged; everything else a PodList. A
    request without an EKS bearer token, or to /forbidden, is answered 401."""

    def __init__(self, directory) -> None:
        import ssl

        cert, key, self.authority = _certificate(directory)
        self.received: list[dict] = []
        self.reads: dict[str, int] = {}
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                stand_in.received.append({"method": self.command, "path": self.path, "body": body,
                                          "authorization": self.headers.get("Authorization", "")})
                status, answer = stand_in.answer(self.command, self.path, body,
                                                 self.headers.get("Authorization", ""))
                text = answer if isinstance(answer, str) else json.dumps(answer)
                self.send_response(status)
                self.send_header("Content-Type", "text/plain" if isinstance(answer, str) else "application/json")
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text.encode())

            do_GET = do_POST = do_DELETE = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.endpoint = f"https://127.0.0.1:{self.server.server_address[1]}"

    def answer(self, method: str, path: str, body, authorization: str) -> tuple[int, object]:
        if not authorization.startswith("Bearer k8s-aws-v1.") or path.startswith("/forbidden"):
            return 401, {"kind": "Status", "status": "Failure", "message": "Unauthorized", "code": 401}
        route = path.split("?")[0]
        if method == "POST" and route.endswith("/jobs"):
            return 201, {**body, "metadata": {**body["metadata"], "namespace": route.split("/")[5]}}
        if route.startswith("/apis/batch/v1/") and method == "GET":
            name = route.rsplit("/", 1)[1]
            self.reads[name] = self.reads.get(name, 0) + 1
            ended = ("Failed" if "fail" in name else "Complete") if self.reads[name] > 1 else None
            status = {"active": 1} if ended is None else {"conditions": [{"type": ended, "status": "True"}]}
            return 200, {"kind": "Job", "metadata": {"name": name}, "status": status}
        if route.startswith("/apis/batch/v1/") and method == "DELETE":
            return 200, {"kind": "Status", "status": "Success"}
        if route.endswith("/log"):
            return 200, '{"answer": 42}'
        return 200, {"kind": "PodList", "items": [{"metadata": {"name": "pod-1"},
                                                   "spec": {"containers": [{"name": "main"}]}}]}


@pytest.fixture(scope="module")
def kubernetes(tmp_path_factory):
    stand_in = StandInKubernetes(tmp_path_factory.mktemp("k8s"))
    yield stand_in
    stand_in.server.shutdown()
    stand_in.server.server_close()


def _cluster(kubernetes) -> dict:
    return {"ClusterName": "k", "CertificateAuthority": kubernetes.authority, "Endpoint": kubernetes.endpoint}


def test_eks_call_reaches_the_cluster_api_with_an_eks_token_over_its_own_tls(sfn, kubernetes):
    result = output(run(sfn, task("arn:aws:states:::eks:call", {
        **_cluster(kubernetes), "Method": "GET", "Path": "/api/v1/namespaces/default/pods",
        "QueryParameters": {"labelSelector": ["app=web"]}})))
    assert result["StatusCode"] == 200 and result["ResponseBody"]["kind"] == "PodList"
    sent = kubernetes.received[-1]
    assert sent["path"] == "/api/v1/namespaces/default/pods?labelSelector=app%3Dweb"
    token = sent["authorization"].removeprefix("Bearer k8s-aws-v1.")
    presigned = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    assert "Action=GetCallerIdentity" in presigned and "X-Amz-SignedHeaders=host%3Bx-k8s-aws-id" in presigned


def test_eks_call_refused_by_the_cluster_fails_with_its_status_and_answer(sfn, kubernetes):
    described = run(sfn, task("arn:aws:states:::eks:call", {**_cluster(kubernetes), "Method": "GET",
                                                            "Path": "/forbidden"}))
    assert described["status"] == "FAILED" and described["error"] == "EKS.401"
    cause = json.loads(described["cause"])
    assert cause["StatusCode"] == 401 and cause["ResponseBody"]["message"] == "Unauthorized"


def _job(name: str) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": {"spec": {"containers": [{"name": "main", "image": "busybox"}],
                                           "restartPolicy": "Never"}}}}


def test_eks_run_job_sync_follows_the_job_to_its_end_and_returns_its_logs(sfn, kubernetes):
    name = _name("job")
    described = run(sfn, task("arn:aws:states:::eks:runJob.sync", {
        **_cluster(kubernetes), "Namespace": "batch", "Job": _job(name), "LogOptions": {"RetrieveLogs": True}}))
    result = output(described)
    assert result["ResponseBody"]["status"]["conditions"][0]["type"] == "Complete"
    assert result["logs"] == {"pods": {"pod-1": {"containers": {"main": {"log": {"answer": 42}}}}}}
    submitted = next(e for e in described["events"] if e["type"] == "TaskSubmitted")["taskSubmittedEventDetails"]
    assert json.loads(submitted["output"])["StatusCode"] == 201
    assert any(sent["path"] == "/apis/batch/v1/namespaces/batch/jobs" and sent["method"] == "POST"
               for sent in kubernetes.received)


def test_eks_run_job_that_fails_fails_the_task_and_a_bad_authority_is_refused(sfn, kubernetes):
    failed = run(sfn, task("arn:aws:states:::eks:runJob.sync", {**_cluster(kubernetes), "Job": _job(_name("fail"))}))
    assert failed["status"] == "FAILED" and failed["error"] == "States.TaskFailed"
    assert json.loads(failed["cause"])["ResponseBody"]["status"]["conditions"][0]["type"] == "Failed"
    refused = run(sfn, task("arn:aws:states:::eks:runJob", {**_cluster(kubernetes), "CertificateAuthority": "x",
                                                            "Job": _job(_name("j"))}))
    assert refused["status"] == "FAILED" and refused["error"] == "States.Runtime"
    assert "CertificateAuthority" in refused["cause"]


def test_an_abandoned_eks_job_is_deleted(sfn, kubernetes):
    name = _name("slow")
    kubernetes.reads[name] = -1000  # it runs for a long while
    described = run(sfn, task("arn:aws:states:::eks:runJob.sync", {**_cluster(kubernetes), "Job": _job(name)},
                              TimeoutSeconds=2))
    assert described["status"] == "FAILED" and described["error"] == "States.Timeout"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(
            sent["method"] == "DELETE" and name in sent["path"] for sent in kubernetes.received):
        time.sleep(0.1)
    deleted = [sent for sent in kubernetes.received if sent["method"] == "DELETE" and name in sent["path"]]
    assert deleted and deleted[0]["path"].endswith("?propagationPolicy=Foreground")
