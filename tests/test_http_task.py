"""arn:aws:states:::http:invoke run by a real server against a real local HTTP endpoint."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from server import ROLE_ARN, ServerProcess, history, wait_closed

pytestmark = pytest.mark.slow  # a real server process: not in the fast tier

CONNECTION = "arn:aws:events:us-east-1:123456789012:connection/orders/abc"


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.headers.get("x-api-key") != "secret":
            self.send_response(401)
            self.end_headers()
            return
        if self.path.startswith("/missing"):
            self.send_response(404)
            self.end_headers()
            return
        reply = json.dumps({"got": body, "path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def endpoint():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def sfn(tmp_path_factory):
    """A server of its own, started with a connections file that holds the endpoint's API key."""
    folder = tmp_path_factory.mktemp("http")
    connections = folder / "connections.json"
    connections.write_text(json.dumps({CONNECTION: {"AuthorizationType": "API_KEY", "AuthParameters": {
        "ApiKeyAuthParameters": {"ApiKeyName": "x-api-key", "ApiKeyValue": "secret"}}}}))
    process = ServerProcess(folder / "data", extra_args=("--connections", str(connections))).start()
    yield process.client()
    process.stop()


@pytest.fixture
def make_machine(sfn):
    def make(definition: dict) -> str:
        name = f"http-{abs(hash(json.dumps(definition))) % 10**12}-{threading.get_ident() % 1000}"
        return sfn.create_state_machine(name=name, definition=json.dumps(definition), roleArn=ROLE_ARN)[
            "stateMachineArn"]
    return make


def task(url: str, **extra) -> dict:
    return {"Type": "Task", "Resource": "arn:aws:states:::http:invoke",
            "Parameters": {"ApiEndpoint": url, "Method": "POST", "RequestBody": {"order.$": "$.order"},
                           "QueryParameters": {"q": "1"}, "Authentication": {"ConnectionArn": CONNECTION}},
            **extra}


def machine(make_machine, url: str, **extra) -> str:
    return make_machine({"StartAt": "Call", "States": {"Call": task(url, End=True, **extra)}})


def test_http_task_calls_the_endpoint_and_returns_the_response(sfn, make_machine, endpoint):
    arn = machine(make_machine, f"{endpoint}/orders", ResultSelector={"status.$": "$.StatusCode",
                                                                      "body.$": "$.ResponseBody"})
    execution = sfn.start_execution(stateMachineArn=arn, input='{"order": 7}')["executionArn"]
    described = wait_closed(sfn, execution)
    assert described["status"] == "SUCCEEDED", described
    assert json.loads(described["output"]) == {"status": 200, "body": {"got": {"order": 7}, "path": "/orders?q=1"}}
    types = [event["type"] for event in history(sfn, execution)]
    assert types == ["ExecutionStarted", "TaskStateEntered", "TaskScheduled", "TaskStarted", "TaskSucceeded",
                     "TaskStateExited", "ExecutionSucceeded"]
    scheduled = history(sfn, execution)[2]["taskScheduledEventDetails"]
    assert (scheduled["resourceType"], scheduled["resource"]) == ("http", "invoke")


def test_http_error_status_is_a_named_error_that_retry_and_catch_see(sfn, make_machine, endpoint):
    arn = make_machine({"StartAt": "Call", "States": {
        "Call": task(f"{endpoint}/missing", Next="Done",
                     Retry=[{"ErrorEquals": ["States.Http.StatusCode.404"], "MaxAttempts": 1, "IntervalSeconds": 1}],
                     Catch=[{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Done"}]),
        "Done": {"Type": "Pass", "End": True}}})
    execution = sfn.start_execution(stateMachineArn=arn, input='{"order": 2}')["executionArn"]
    described = wait_closed(sfn, execution)
    assert json.loads(described["output"])["error"]["Error"] == "States.Http.StatusCode.404"
    types = [event["type"] for event in history(sfn, execution)]
    assert types.count("TaskScheduled") == 2 and types.count("TaskFailed") == 2


def test_unreachable_endpoint_fails_with_a_socket_error(sfn, make_machine):
    arn = machine(make_machine, "http://127.0.0.1:9/nothing-listens")
    described = wait_closed(sfn, sfn.start_execution(stateMachineArn=arn, input='{"order": 1}')["executionArn"])
    assert (described["status"], described["error"]) == ("FAILED", "States.Http.Socket")


def test_an_unknown_connection_fails_the_task(sfn, make_machine, endpoint):
    definition = task(f"{endpoint}/orders", End=True)
    definition["Parameters"]["Authentication"]["ConnectionArn"] = CONNECTION + "-other"
    arn = make_machine({"StartAt": "Call", "States": {"Call": definition}})
    described = wait_closed(sfn, sfn.start_execution(stateMachineArn=arn, input='{"order": 1}')["executionArn"])
    assert described["error"] == "Events.ConnectionResource.ResourceNotFound"


def test_test_state_calls_the_endpoint_for_an_http_task(sfn, endpoint):
    state = task(f"{endpoint}/orders", End=True, ResultSelector={"status.$": "$.StatusCode"})
    result = sfn.test_state(definition=json.dumps(state), input='{"order": 3}', roleArn=ROLE_ARN,
                            inspectionLevel="DEBUG")
    assert (result["status"], json.loads(result["output"])) == ("SUCCEEDED", {"status": 200})
    assert json.loads(result["inspectionData"]["afterParameters"])["RequestBody"] == {"order": 3}
    assert json.loads(result["inspectionData"]["result"])["ResponseBody"]["got"] == {"order": 3}


@pytest.mark.parametrize("reveal", [False, True])
def test_test_state_at_trace_shows_the_request_and_response_and_hides_the_connections_secrets(sfn, endpoint,
                                                                                                reveal):
    state = task(f"{endpoint}/orders", End=True)
    result = sfn.test_state(definition=json.dumps(state), input='{"order": 3}', roleArn=ROLE_ARN,
                            inspectionLevel="TRACE",
                            revealSecrets=reveal)
    request, response = result["inspectionData"]["request"], result["inspectionData"]["response"]
    assert (request["method"], request["url"], request["protocol"]) == ("POST", f"{endpoint}/orders?q=1", "http")
    assert json.loads(request["body"]) == {"order": 3}
    assert ("x-api-key: secret" in request["headers"]) is reveal  # the connection's key only when revealed
    assert (response["statusCode"], response["statusMessage"]) == ("200", "OK")
    assert json.loads(response["body"])["got"] == {"order": 3}
    debug = sfn.test_state(definition=json.dumps(state), input='{"order": 3}', roleArn=ROLE_ARN,
                            inspectionLevel="DEBUG")
    assert "request" not in debug["inspectionData"]
