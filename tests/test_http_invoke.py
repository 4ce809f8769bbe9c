"""The HTTP Task's call (statewright.integrations.http.invoke) against a real HTTP server on 127.0.0.1.

No mock of the HTTP layer: a standard-library server in a thread answers by path. /echo returns what it received,
so most assertions read the request back out of the task result.
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import pytest

from statewright.decider.outcomes import AttemptFailed, AttemptSucceeded
from statewright.integrations.http import Connections, invoke

REGION = "us-east-1"
API_KEY_ARN = f"arn:aws:events:{REGION}:123456789012:connection/Example/81210c42"
BASIC_ARN = f"arn:aws:events:{REGION}:123456789012:connection/Basic/5f1e0c1a"
OAUTH_ARN = f"arn:aws:events:{REGION}:123456789012:connection/OAuth/aeabd89e"
CLIENT_ID, CLIENT_SECRET = "client-id", "client secret"


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.release = threading.Event()  # lets /slow answer
        self.tokens_issued = 0
        self.accepted_tokens: set[str] = set()

    def handle_error(self, request, client_address) -> None:
        pass  # a client that gave up (the timeout test) is expected


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.body = self.rfile.read(length).decode() if length else ""
        path, _, self.query = self.path.partition("?")
        route = getattr(self, "route_" + path.strip("/").replace("-", "_"), None)
        if route is None:
            self.answer(404, "application/json", b'{"message":"no such route"}')
        else:
            route()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = do_GET

    def answer(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Multi", "one")
        self.send_header("X-Multi", "two")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def route_echo(self) -> None:
        seen = {"method": self.command, "query": self.query, "body": self.body,
                "headers": {name.lower(): value for name, value in self.headers.items()}}
        self.answer(200, "application/json", json.dumps(seen).encode())

    def route_text(self) -> None:
        self.answer(200, "text/plain; charset=utf-8", "hello, wörld".encode())

    def route_image(self) -> None:
        self.answer(200, "image/png", b"\x89PNG\r\n")

    def route_big(self) -> None:
        self.answer(200, "text/plain", b"x" * 262_145)

    def route_teapot(self) -> None:
        self.answer(418, "application/json", b'{"why":"short and stout"}')

    def route_slow(self) -> None:
        self.server.release.wait(5)
        self.answer(200, "text/plain", b"late")

    def route_token(self) -> None:
        expected = "Basic " + base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
        form = parse_qs(self.body)
        if self.headers.get("Authorization") != expected or form.get("grant_type") != ["client_credentials"] \
                or form.get("scope") != ["read"]:
            self.answer(400, "application/json", b'{"error":"invalid_client"}')
            return
        self.server.tokens_issued += 1
        token = f"tok-{self.server.tokens_issued}"
        self.server.accepted_tokens.add(token)
        self.answer(200, "application/json", json.dumps({"access_token": token, "token_type": "Bearer",
                                                         "expires_in": 3600}).encode())

    def route_protected(self) -> None:
        scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
        if scheme != "Bearer" or token not in self.server.accepted_tokens:
            self.answer(401, "application/json", b'{"message":"who are you"}')
        else:
            self.answer(200, "application/json", json.dumps({"token": token}).encode())


@pytest.fixture(scope="module")
def server():
    httpd = _Server()
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.release.set()
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


@pytest.fixture
def base(server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def connections_file(tmp_path, base):
    path = tmp_path / "connections.json"
    path.write_text(json.dumps({
        API_KEY_ARN: {"AuthorizationType": "API_KEY", "AuthParameters": {
            "ApiKeyAuthParameters": {"ApiKeyName": "ApiKey", "ApiKeyValue": "key_value"},
            "InvocationHttpParameters": {
                "BodyParameters": [{"Key": "BodyParam", "Value": "connection_body_param"}],
                "HeaderParameters": [{"Key": "Header-Param", "Value": "connection_header_param"}],
                "QueryStringParameters": [{"Key": "QueryParam", "Value": "connection_query_param"}]}}},
        BASIC_ARN: {"AuthorizationType": "BASIC", "AuthParameters": {
            "BasicAuthParameters": {"Username": "myUsername", "Password": "myPassword"}}},
        OAUTH_ARN: {"AuthorizationType": "OAUTH_CLIENT_CREDENTIALS", "AuthParameters": {"OAuthParameters": {
            "AuthorizationEndpoint": f"{base}/token", "HttpMethod": "POST",
            "ClientParameters": {"ClientID": CLIENT_ID, "ClientSecret": CLIENT_SECRET},
            "OAuthHttpParameters": {"BodyParameters": [{"Key": "scope", "Value": "read"}]}}}},
    }))
    return path


@pytest.fixture
def connections(connections_file) -> Connections:
    return Connections(connections_file)


def call(connections: Connections, timeout_s: float = 5, **parameters) -> AttemptSucceeded | AttemptFailed:
    parameters.setdefault("Authentication", {"ConnectionArn": BASIC_ARN})
    return asyncio.run(invoke(parameters, connections, timeout_s=timeout_s))


def succeeded(outcome: AttemptSucceeded | AttemptFailed) -> dict:
    assert isinstance(outcome, AttemptSucceeded), outcome
    return json.loads(outcome.output)


def failed(outcome: AttemptSucceeded | AttemptFailed) -> AttemptFailed:
    assert isinstance(outcome, AttemptFailed), outcome
    return outcome


def test_get_with_query_parameters(connections, base):
    result = succeeded(call(connections, ApiEndpoint=f"{base}/echo?page=2", Method="GET",
                            QueryParameters={"currency": "usd", "tag": ["a", "b"], "q": "x y&z"}))
    assert result["StatusCode"] == 200 and result["StatusText"] == "OK"
    seen = result["ResponseBody"]
    assert seen["method"] == "GET"
    assert seen["query"] == "page=2&currency=usd&tag=a&tag=b&q=x%20y%26z"
    assert seen["body"] == "" and "content-type" not in seen["headers"]
    assert result["Headers"]["content-type"] == ["application/json"]
    assert result["Headers"]["x-multi"] == ["one", "two"]


def test_post_json_body_and_headers(connections, base):
    seen = succeeded(call(connections, ApiEndpoint=f"{base}/echo", Method="POST",
                          Headers={"X-Request-Id": "r-1", "Accept": ["application/json", "text/plain"]},
                          RequestBody={"Card": {"Number": "1234567890", "Expiry": "09/25"}, "n": [1, 2.5]}
                          ))["ResponseBody"]
    assert seen["method"] == "POST"
    assert json.loads(seen["body"]) == {"Card": {"Number": "1234567890", "Expiry": "09/25"}, "n": [1, 2.5]}
    headers = seen["headers"]
    assert headers["content-type"] == "application/json; charset=UTF-8"
    assert headers["x-request-id"] == "r-1" and headers["accept"] == "application/json, text/plain"
    assert headers["user-agent"] == f"Amazon|StepFunctions|HttpInvoke|{REGION}"
    assert headers["range"] == "bytes=0-262144"
    assert headers["authorization"] == "Basic " + base64.b64encode(b"myUsername:myPassword").decode()


def test_connection_values_win_the_merge(connections, base):
    """AWS's own merging example: the request it documents is the request that goes out."""
    seen = succeeded(call(
        connections, ApiEndpoint=f"{base}/echo", Method="POST", Authentication={"ConnectionArn": API_KEY_ARN},
        Headers={"Request-Id": "my_request_id", "Header-Param": "state_machine_header_param"},
        RequestBody={"Job": "Software Engineer", "Company": "AnyCompany", "BodyParam": "state_machine_body_param"},
        QueryParameters={"QueryParam": "state_machine_query_param"}))["ResponseBody"]
    assert seen["query"] == "QueryParam=connection_query_param"
    assert seen["body"] == '{"Job":"Software Engineer","Company":"AnyCompany","BodyParam":"connection_body_param"}'
    headers = seen["headers"]
    assert headers["apikey"] == "key_value"
    assert headers["header-param"] == "connection_header_param"
    assert headers["request-id"] == "my_request_id"
    assert headers["content-type"] == "application/json; charset=UTF-8"


@pytest.mark.parametrize(("array_format", "encoded"), [
    (None, "array%5B0%5D=a&array%5B1%5D=b&array%5B2%5D=c&array%5B3%5D=d"),
    ("INDICES", "array%5B0%5D=a&array%5B1%5D=b&array%5B2%5D=c&array%5B3%5D=d"),
    ("REPEAT", "array=a&array=b&array=c&array=d"),
    ("COMMAS", "array=a,b,c,d"),
    ("BRACKETS", "array%5B%5D=a&array%5B%5D=b&array%5B%5D=c&array%5B%5D=d"),
])
def test_url_encoded_body_in_each_array_format(connections, base, array_format, encoded):
    transform = {"RequestBodyEncoding": "URL_ENCODED"}
    if array_format:
        transform["RequestEncodingOptions"] = {"ArrayFormat": array_format}
    seen = succeeded(call(connections, ApiEndpoint=f"{base}/echo", Method="POST", Transform=transform,
                          RequestBody={"array": ["a", "b", "c", "d"]}))["ResponseBody"]
    assert seen["body"] == encoded
    assert seen["headers"]["content-type"] == "application/x-www-form-urlencoded"


def test_url_encoded_nested_object_as_in_the_aws_example(connections, base):
    result = succeeded(call(
        connections, ApiEndpoint=f"{base}/echo", Method="POST",
        Headers={"Content-Type": "application/x-www-form-urlencoded"},
        Transform={"RequestBodyEncoding": "URL_ENCODED", "RequestEncodingOptions": {"ArrayFormat": "INDICES"}},
        RequestBody={"customer": "1234567890", "description": "Monthly subscription",
                     "metadata": {"order_details": "monthly report data"}, "paid": False, "total": 12.5}))
    assert result["ResponseBody"]["body"] == ("customer=1234567890&description=Monthly%20subscription"
                                              "&metadata%5Border_details%5D=monthly%20report%20data"
                                              "&paid=false&total=12.5")


def test_non_json_response_is_text(connections, base):
    result = succeeded(call(connections, ApiEndpoint=f"{base}/text", Method="GET"))
    assert result["ResponseBody"] == "hello, wörld"


def test_head_has_an_empty_body(connections, base):
    result = succeeded(call(connections, ApiEndpoint=f"{base}/echo", Method="HEAD"))
    assert result["ResponseBody"] == "" and result["StatusCode"] == 200


def test_error_status_fails_with_its_code(connections, base):
    assert call(connections, ApiEndpoint=f"{base}/nowhere", Method="GET") == AttemptFailed(
        "States.Http.StatusCode.404", "Not Found")
    assert call(connections, ApiEndpoint=f"{base}/teapot", Method="DELETE") == AttemptFailed(
        "States.Http.StatusCode.418", "I'm a Teapot")


def test_connection_refused_is_a_socket_failure(connections):
    with socket.socket() as bound:  # bound but not listening: connecting is refused
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        outcome = call(connections, ApiEndpoint=f"http://127.0.0.1:{port}/x", Method="GET")
    assert failed(outcome).error == "States.Http.Socket"
    assert "refused" in outcome.cause.lower()


def test_slow_server_times_out(connections, base, server):
    try:
        outcome = call(connections, timeout_s=0.2, ApiEndpoint=f"{base}/slow", Method="GET")
    finally:
        server.release.set()
    assert outcome == AttemptFailed("States.Http.Socket", "The HTTP request did not complete within 0.2 seconds")


def test_unsupported_responses_fail(connections, base):
    outcome = call(connections, ApiEndpoint=f"{base}/image", Method="GET")
    assert failed(outcome).error == "States.Runtime" and "image/png" in outcome.cause
    outcome = call(connections, ApiEndpoint=f"{base}/big", Method="GET")
    assert failed(outcome).error == "States.DataLimitExceeded"


def test_forbidden_headers_fail_before_any_request(connections, base):
    outcome = call(connections, ApiEndpoint=f"{base}/echo", Method="GET",
                   Headers={"Authorization": "Bearer x", "X-Amz-Date": "now", "X-Fine": "yes"})
    assert outcome == AttemptFailed("States.Runtime",
                       "The 'Headers' field contains unsupported values: [authorization, x-amz-date]")


def test_string_body_cannot_merge_with_connection_body(connections, base):
    outcome = call(connections, ApiEndpoint=f"{base}/echo", Method="POST", RequestBody="raw text",
                   Authentication={"ConnectionArn": API_KEY_ARN})
    assert failed(outcome).error == "States.Runtime"
    seen = succeeded(call(connections, ApiEndpoint=f"{base}/echo", Method="POST", RequestBody="raw text"))
    assert seen["ResponseBody"]["body"] == "raw text"


def test_connection_problems(connections, base):
    outcome = call(connections, ApiEndpoint=f"{base}/echo", Method="GET",
                   Authentication={"ConnectionArn": "arn:aws:events:us-east-1:1:connection/nope/1"})
    assert failed(outcome).error == "Events.ConnectionResource.ResourceNotFound"
    outcome = asyncio.run(invoke({"ApiEndpoint": f"{base}/echo", "Method": "GET"}, connections))
    assert failed(outcome).error == "States.Runtime"
    seen = succeeded(asyncio.run(invoke({"ApiEndpoint": f"{base}/echo", "Method": "GET",
                                         "InvocationConfig": {"ConnectionArn": API_KEY_ARN}}, connections)))
    assert seen["ResponseBody"]["headers"]["apikey"] == "key_value"


@pytest.mark.parametrize("parameters", [
    {"ApiEndpoint": "ftp://example.com/", "Method": "GET"},
    {"ApiEndpoint": "http://127.0.0.1:1/", "Method": "get"},
    {"ApiEndpoint": "http://127.0.0.1:1/", "Method": "GET", "Transform": {"RequestBodyEncoding": "GZIP"}},
    {"ApiEndpoint": "http://127.0.0.1:1/", "Method": "GET", "Headers": {"X-Bad": "a\r\nb"}},
])
def test_malformed_parameters_are_runtime_failures(connections, parameters):
    assert failed(call(connections, **parameters)).error == "States.Runtime"


def test_oauth_client_credentials_token_is_fetched_cached_and_renewed(connections_file, base, server):
    now_s = [1000.0]
    connections = Connections(connections_file, clock=lambda: now_s[0])
    server.tokens_issued = 0
    server.accepted_tokens.clear()

    def protected() -> tuple:
        return call(connections, ApiEndpoint=f"{base}/protected", Method="GET",
                    Authentication={"ConnectionArn": OAUTH_ARN})

    assert succeeded(protected())["ResponseBody"] == {"token": "tok-1"}
    assert succeeded(protected())["ResponseBody"] == {"token": "tok-1"}  # cached
    now_s[0] += 3600 - 59  # within a minute of expiry: renewed before use
    assert succeeded(protected())["ResponseBody"] == {"token": "tok-2"}
    server.accepted_tokens.clear()  # revoked at the provider
    assert protected() == AttemptFailed("States.Http.StatusCode.401", "Unauthorized")
    assert succeeded(protected())["ResponseBody"] == {"token": "tok-3"}  # the 401 dropped the cached token
    assert server.tokens_issued == 3


def test_oauth_token_endpoint_refusal(tmp_path, base):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({OAUTH_ARN: {"AuthorizationType": "OAUTH_CLIENT_CREDENTIALS", "AuthParameters": {
        "OAuthParameters": {"AuthorizationEndpoint": f"{base}/token", "HttpMethod": "POST",
                            "ClientParameters": {"ClientID": CLIENT_ID, "ClientSecret": "wrong"}}}}}))
    outcome = call(Connections(path), ApiEndpoint=f"{base}/protected", Method="GET",
                   Authentication={"ConnectionArn": OAUTH_ARN})
    assert failed(outcome).error == "Events.ConnectionResource.InvalidConnectionState"
    assert "400" in outcome.cause


@pytest.mark.parametrize(("entry", "message"), [
    ({"AuthorizationType": "BASIC", "AuthParameters": {}}, "BasicAuthParameters"),
    ({"AuthorizationType": "TOKEN", "AuthParameters": {}}, "AuthorizationType"),
    ({"AuthorizationType": "API_KEY", "AuthParameters": {
        "ApiKeyAuthParameters": {"ApiKeyName": "k", "ApiKeyValue": "v"},
        "InvocationHttpParameters": {"HeaderParameters": [{"Value": "no key"}]}}}, "InvocationHttpParameters"),
])
def test_malformed_connections_file_is_refused(tmp_path, entry, message):
    path = tmp_path / "broken.json"
    path.write_text(json.dumps({BASIC_ARN: entry}))
    with pytest.raises(ValueError, match=message):
        Connections(path)


def test_a_body_ended_by_closing_the_connection_is_complete(connections):
    """An HTTP/1.0 server frames an error body by closing: the status still names the error."""
    listener = socket.create_server(("127.0.0.1", 0))

    def answer() -> None:
        peer, _ = listener.accept()
        with peer:
            peer.recv(65536)
            peer.sendall(b'HTTP/1.0 404 Not Found\r\nContent-Type: application/json\r\n\r\n{"err":"x"}')

    threading.Thread(target=answer, daemon=True).start()
    try:
        outcome = call(connections, ApiEndpoint=f"http://127.0.0.1:{listener.getsockname()[1]}/gone", Method="GET")
    finally:
        listener.close()
    assert failed(outcome).error == "States.Http.StatusCode.404"
