"""What botocore's models say about AWS services, in Step Functions' terms.

A Task names an AWS SDK service as ``arn:aws:states:::aws-sdk:<service>:<action>``, where ``<service>`` is the name
the AWS SDK for Java 2.x gives the service, in lower case (``sfn``, ``dynamodb``, ``cloudwatchlogs``,
``eventbridge``), and ``<action>`` the operation in camelCase (``getItem``). Errors are named
``<Service>.<Exception>`` with the same SDK's class names (``DynamoDb.ResourceNotFoundException``,
``Sqs.QueueDoesNotExistException``). botocore names services differently (``stepfunctions``, ``logs``, ``events``),
so the Java name is derived here from each model's ``serviceId``, as that SDK's code generator derives it: the
"Amazon" or "AWS" prefix and the "Service" suffix dropped, each word in PascalCase with acronyms cased as words
(``DynamoDB`` -> ``DynamoDb``, ``SFN`` -> ``Sfn``). Exception names follow the same casing, with ``Fault`` and a
missing suffix becoming ``Exception``.

Sources: AWS's "Learning to use AWS service SDK integrations" (resource syntax, PascalCase parameters,
``EqualsValue``, the ``Exception`` suffix); the service and error names above as Step Functions reported them.
Inferred: the casing rule for services and errors not listed there.
"""

from __future__ import annotations

import functools
import gzip
import os
import re
from pathlib import Path

import botocore
import botocore.session
from botocore.model import OperationModel, ServiceModel

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z][a-z0-9]*|[a-z0-9]+")
_SERVICE_ID = re.compile(rb'"serviceId"\s*:\s*"([^"]+)"')
_DATA = Path(os.path.dirname(botocore.__file__)) / "data"


def pascal_words(name: str) -> str:
    """``DBInstanceNotFound`` -> ``DbInstanceNotFound``: every word capitalised, acronyms cased as words."""
    return "".join(word[0].upper() + word[1:].lower() for word in _WORD.findall(name))


def java_service_name(service_id: str) -> str:
    """The AWS SDK for Java 2.x name of a service, from its model's serviceId (``CloudWatch Logs`` ->
    ``CloudWatchLogs``)."""
    name = re.sub(r"^(Amazon|AWS)\s*(?=\S)", "", service_id)
    name = re.sub(r"\s+Service$", "", name)
    return "".join(pascal_words(word) if not word.isdigit() else word for word in re.split(r"[\s\-_]+", name))


def java_exception_name(shape_name: str, service: str) -> str:
    """An error shape's class name in the AWS SDK for Java 2.x (``QueueDoesNotExist`` ->
    ``QueueDoesNotExistException``)."""
    name = re.sub(r"Fault$", "Exception", shape_name)
    if not name.endswith("Exception"):
        name += "Exception"
    name = pascal_words(name)
    return f"Default{name}" if name == f"{service}Exception" else name


@functools.cache
def sdk_services() -> dict[str, str]:
    """Step Functions' SDK service name -> botocore's service name, for every service botocore models."""
    names: dict[str, str] = {}
    for directory in sorted(_DATA.iterdir()):
        versions = sorted(path for path in directory.iterdir() if path.is_dir()) if directory.is_dir() else []
        model = next((version / file for version in reversed(versions)
                      for file in ("service-2.json.gz", "service-2.json") if (version / file).exists()), None)
        if model is None:
            continue
        opener = gzip.open if model.suffix == ".gz" else open
        with opener(model, "rb") as stream:
            found = _SERVICE_ID.search(stream.read(4096))  # the metadata comes first: no need to read the rest
        if found:
            names.setdefault(java_service_name(found[1].decode()).lower(), directory.name)
    return names


class Service:
    """One AWS service as Step Functions sees it: its botocore model, names and errors."""

    def __init__(self, botocore_name: str) -> None:
        self.botocore_name = botocore_name
        self.model: ServiceModel = _session().get_service_model(botocore_name)
        self.java_name = java_service_name(self.model.metadata["serviceId"])
        self._errors = {shape.error_code: shape.name for shape in self.model.error_shapes}

    def operation(self, action: str) -> OperationModel | None:
        """The operation a camelCase action names (``getItem`` -> GetItem), or None."""
        name = action[:1].upper() + action[1:]
        return self.model.operation_model(name) if name in self.model.operation_names else None

    def error_shape(self, error: dict) -> str | None:
        """The model's error shape for the error the service answered (botocore's ``response["Error"]``)."""
        return self._errors.get(error.get("QueryErrorCode") or error.get("Code", ""))

    def error_name(self, error: dict) -> str:
        """``<Service>.<Exception>`` for the error the service answered; an error its model does not list is the
        service's own exception class, as the SDK throws it (``DynamoDb.DynamoDbException``)."""
        shape = self.error_shape(error)
        if shape is None:
            return f"{self.java_name}.{self.java_name}Exception"
        return f"{self.java_name}.{java_exception_name(shape, self.java_name)}"


@functools.cache
def _session() -> botocore.session.Session:
    return botocore.session.Session()


@functools.cache
def by_botocore_name(botocore_name: str) -> Service:
    return Service(botocore_name)


def service(sdk_name: str) -> Service | None:
    """The service an ``aws-sdk:<sdk_name>:...`` resource names, or None when botocore does not model it."""
    botocore_name = sdk_services().get(sdk_name)
    return by_botocore_name(botocore_name) if botocore_name else None
