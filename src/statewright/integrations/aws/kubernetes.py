"""``arn:aws:states:::eks:call`` and ``eks:runJob``: calls to an EKS cluster's Kubernetes API, as AWS's page "Create
and manage Amazon EKS clusters with Step Functions" describes them.

Both take the cluster's ``ClusterName``, ``CertificateAuthority`` (its base64 certificate data, which the API's TLS
certificate is checked against) and ``Endpoint`` (its API server's URL). A call is authenticated as EKS expects:
a bearer token ``k8s-aws-v1.<base64url of a presigned STS GetCallerIdentity URL>`` whose signature covers the
``x-k8s-aws-id`` header naming the cluster, signed as the Task's role (or the server's credentials).

- ``call``: ``Method``, ``Path``, ``QueryParameters`` (each name to a list of values) and ``RequestBody``; the result
  is ``{"ResponseBody", "StatusCode", "StatusText"}``.
- ``runJob``: creates ``Job`` (a ``batch/v1`` Job) in ``Namespace`` (default ``default``); its result is the
  creation's answer in the same form. With ``.sync`` the Job is then read until a ``Complete`` or ``Failed``
  condition is true; its result is the last read, with ``logs.pods.<pod>.containers.<container>.log`` when
  ``LogOptions.RetrieveLogs`` is true (JSON when a log parses, unless ``RawLogs``; ``LogParameters`` go to the log
  call). Logs are best effort: a log that cannot be read gives ``error`` and ``cause`` in its place. An abandoned
  Job is deleted, its pods with it.

A status outside 2xx fails the Task with ``EKS.<status>`` and the answer in that form as the cause (AWS's page shows
``EKS.401``); no answer fails it with ``EKS.SdkClientException`` (inferred), a failed Job with States.TaskFailed.
Inferred, not verified against AWS: the deletion of an abandoned Job, and the token's expiry (60 s, as the
aws-iam-authenticator's).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import ssl
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote, urlencode

from botocore.auth import SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from ...asl import errors
from ...asl.jsonio import dumps, loads
from ...decider.outcomes import AttemptFailed, AttemptPolled, AttemptSucceeded
from .. import http
from .clients import CredentialsFor

CALL_FIELDS = ("ClusterName", "CertificateAuthority", "Endpoint", "Method", "Path", "QueryParameters",
               "RequestBody")
JOB_FIELDS = ("ClusterName", "CertificateAuthority", "Endpoint", "Namespace", "Job", "LogOptions")
METHODS = ("GET", "POST", "PUT", "DELETE", "HEAD", "PATCH")
NO_ANSWER = "EKS.SdkClientException"
TASK_FAILED = "States.TaskFailed"  # a Job that failed, as a .sync job that fails does
TOKEN_EXPIRES_S = 60
Outcome = AttemptSucceeded | AttemptFailed


class Cluster:
    """Where a cluster's API is and how it is reached: its endpoint, the TLS context of its certificate authority,
    and a token for it."""

    def __init__(self, given: dict, region: str) -> None:
        for name in ("ClusterName", "CertificateAuthority", "Endpoint"):
            if not isinstance(given.get(name), str) or not given[name]:
                raise http.Failure(errors.RUNTIME, f"The field '{name}' is required: a string")
        self.name, self.region = given["ClusterName"], region
        self.endpoint = given["Endpoint"].rstrip("/")
        if not self.endpoint.startswith("https://"):  # the token must not travel in the clear
            raise http.Failure(errors.RUNTIME, "The field 'Endpoint' must be the cluster API's https URL")
        try:
            authority = base64.b64decode(given["CertificateAuthority"], validate=True).decode("ascii")
            self.tls = ssl.create_default_context(cadata=authority)
        except (binascii.Error, UnicodeDecodeError, ssl.SSLError, ValueError):
            raise http.Failure(errors.RUNTIME, "The field 'CertificateAuthority' is not a base64 PEM "
                                               "certificate") from None

    def token(self, credentials: Credentials | None) -> str:
        if credentials is None:
            raise http.Failure(NO_ANSWER, "No AWS credentials to authenticate to the cluster with")
        url = (f"https://sts.{self.region}.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15")
        request = AWSRequest("GET", url, headers={"x-k8s-aws-id": self.name})
        SigV4QueryAuth(credentials, "sts", self.region, expires=TOKEN_EXPIRES_S).add_auth(request)
        signed = request.prepare().url
        return "k8s-aws-v1." + base64.urlsafe_b64encode(signed.encode()).decode().rstrip("=")

    async def request(self, method: str, path: str, credentials: Credentials | None, body: Any = None,
                      query: list[tuple[str, str]] | None = None) -> tuple[int, str, Any]:
        """(status, status text, the answer's body: JSON when it parses, else its text)."""
        url = self.endpoint + "/" + quote(path.lstrip("/"), safe="/:@")
        if query:
            url += "?" + urlencode(query)
        headers = [("Authorization", f"Bearer {self.token(credentials)}"), ("Accept", "application/json")]
        data = None
        if body is not None:
            data = body.encode() if isinstance(body, str) else dumps(body).encode()
            headers.append(("Content-Type", "application/json"))
        response = await http.exchange(http.Request(method, url, headers, data), tls=self.tls)
        text = response.body.decode("utf-8", errors="replace")
        try:
            parsed: Any = loads(text) if text.strip() else text
        except ValueError:
            parsed = text
        return response.status, response.reason, parsed


def _answer(status: int, reason: str, body: Any) -> dict[str, Any]:
    return {"ResponseBody": body, "StatusCode": status, "StatusText": reason}


def _refused(status: int, reason: str, body: Any) -> AttemptFailed:
    return AttemptFailed(f"EKS.{status}", dumps(_answer(status, reason, body)))


async def _guarded(work: Callable[[], Awaitable[Outcome]]) -> Outcome:
    try:
        return await work()
    except http.Failure as failure:
        return AttemptFailed(NO_ANSWER if failure.error == http.SOCKET else failure.error, failure.cause)
    except ValueError as error:  # a Job given as text that is not JSON
        return AttemptFailed(errors.RUNTIME, f"The field 'Job' is not a JSON object: {error}")


async def call(given: Any, region: str, credentials: CredentialsFor) -> Outcome:
    """eks:call: one request to the cluster's API."""
    async def work() -> Outcome:
        if not isinstance(given, dict):
            raise http.Failure(errors.RUNTIME, "The Parameters of an EKS call must be an object")
        cluster = Cluster(given, region)
        method, path = given.get("Method"), given.get("Path")
        if method not in METHODS:
            raise http.Failure(errors.RUNTIME, f"The Method '{method}' is not one of {', '.join(METHODS)}")
        if not isinstance(path, str) or not path.startswith("/"):
            raise http.Failure(errors.RUNTIME, "The field 'Path' is required: a path such as /api/v1/pods")
        query = _pairs(given.get("QueryParameters"), "QueryParameters")
        status, reason, body = await cluster.request(method, path, await credentials(), given.get("RequestBody"),
                                                     query)
        if not 200 <= status < 300:
            return _refused(status, reason, body)
        return AttemptSucceeded(dumps(_answer(status, reason, body)))
    return await _guarded(work)


def _pairs(value: Any, field_name: str) -> list[tuple[str, str]]:
    """QueryParameters or LogParameters: each name to a list of values, as query pairs."""
    if value is None:
        return []
    if not isinstance(value, dict):
        raise http.Failure(errors.RUNTIME, f"The field '{field_name}' must be an object of lists of strings")
    return [(name, str(item)) for name, items in value.items()
            for item in (items if isinstance(items, list) else [items])]


def _namespace(given: dict) -> str:
    return given.get("Namespace") or "default"


async def run_job(given: Any, region: str, credentials: CredentialsFor) -> Outcome:
    """eks:runJob: the Job created (a .sync task then follows it: ``handle``, ``poll``)."""
    async def work() -> Outcome:
        if not isinstance(given, dict) or not isinstance(given.get("Job"), dict | str):
            raise http.Failure(errors.RUNTIME, "The field 'Job' is required: a batch/v1 Job")
        cluster = Cluster(given, region)
        job = loads(given["Job"]) if isinstance(given["Job"], str) else given["Job"]
        if not isinstance(job, dict):
            raise http.Failure(errors.RUNTIME, "The field 'Job' is required: a batch/v1 Job")
        status, reason, body = await cluster.request(
            "POST", f"/apis/batch/v1/namespaces/{_namespace(given)}/jobs", await credentials(), job)
        if not 200 <= status < 300:
            return _refused(status, reason, body)
        return AttemptSucceeded(dumps(_answer(status, reason, body)))
    return await _guarded(work)


def handle(given: dict, output: dict) -> dict | None:
    """What following a created Job needs: the cluster, the Job's namespace and name, the log options."""
    body = output.get("ResponseBody") if isinstance(output, dict) else None
    metadata = body.get("metadata") if isinstance(body, dict) else None
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str):
        return None
    options = given.get("LogOptions")
    return {**{name: given.get(name) for name in ("ClusterName", "CertificateAuthority", "Endpoint")},
            "Namespace": metadata.get("namespace") or _namespace(given), "Name": metadata["name"],
            "LogOptions": options if isinstance(options, dict) else {}}


def _condition(job: Any) -> str | None:
    """Complete or Failed once the Job has ended (its condition of that type is true), else None."""
    conditions = ((job.get("status") or {}).get("conditions") or []) if isinstance(job, dict) else []
    for condition in conditions:
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return condition["type"]
    return None


async def poll(job: dict, region: str, credentials: CredentialsFor, number: int) -> Outcome | AttemptPolled:
    """Read the Job: its outcome once it ended (with its logs when asked for), else AttemptPolled. A read that
    fails in passing (no answer, the API's own 5xx) is tried again at the next poll."""
    cluster = Cluster(job, region)
    keys = await credentials()
    try:
        status, reason, body = await cluster.request(
            "GET", f"/apis/batch/v1/namespaces/{job['Namespace']}/jobs/{job['Name']}", keys)
    except http.Failure:
        return AttemptPolled(number)
    if status >= 500:
        return AttemptPolled(number)
    if not 200 <= status < 300:
        return _refused(status, reason, body)
    ended = _condition(body)
    if ended is None:
        return AttemptPolled(number)
    result = _answer(status, reason, body)
    if job["LogOptions"].get("RetrieveLogs"):
        result["logs"] = await _logs(cluster, job, keys)
    return AttemptSucceeded(dumps(result)) if ended == "Complete" else AttemptFailed(TASK_FAILED, dumps(result))


async def _logs(cluster: Cluster, job: dict, keys: Credentials | None) -> dict[str, Any]:
    options = job["LogOptions"]
    namespace = job["Namespace"]
    pods: dict[str, Any] = {}
    try:
        status, reason, listed = await cluster.request("GET", f"/api/v1/namespaces/{namespace}/pods", keys,
                                                       query=[("labelSelector", f"job-name={job['Name']}")])
    except http.Failure as failure:
        return {"error": failure.error, "cause": failure.cause}
    if not 200 <= status < 300 or not isinstance(listed, dict):
        return {"error": f"EKS.{status}", "cause": dumps(_answer(status, reason, listed))}
    try:
        extra = _pairs(options.get("LogParameters"), "LogOptions.LogParameters")
    except http.Failure as failure:
        return {"error": failure.error, "cause": failure.cause}
    for pod in listed.get("items") or []:
        name = (pod.get("metadata") or {}).get("name")
        containers: dict[str, Any] = {}
        for container in (pod.get("spec") or {}).get("containers") or []:
            containers[container.get("name")] = await _log(cluster, namespace, name, container.get("name"), keys,
                                                           extra, bool(options.get("RawLogs")))
        pods[name] = {"containers": containers}
    return {"pods": pods}


async def _log(cluster: Cluster, namespace: str, pod: str, container: str, keys: Credentials | None,
               extra: list[tuple[str, str]], raw: bool) -> dict[str, Any]:
    try:
        status, reason, body = await cluster.request("GET", f"/api/v1/namespaces/{namespace}/pods/{pod}/log",
                                                     keys, query=[("container", container), *extra])
    except http.Failure as failure:
        return {"error": failure.error, "cause": failure.cause}
    if not 200 <= status < 300:
        return {"error": f"EKS.{status}", "cause": dumps(_answer(status, reason, body))}
    if raw and not isinstance(body, str):
        body = dumps(body)
    return {"log": body}


async def stop(job: dict, region: str, credentials: CredentialsFor) -> None:
    """Delete an abandoned Job and its pods (an error is left as it is: the Job may be gone already)."""
    cluster = Cluster(job, region)
    with contextlib.suppress(http.Failure):
        await cluster.request("DELETE", f"/apis/batch/v1/namespaces/{job['Namespace']}/jobs/{job['Name']}",
                              await credentials(), query=[("propagationPolicy", "Foreground")])
