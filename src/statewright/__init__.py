"""statewright: a durable workflow engine that speaks the AWS Step Functions API."""

__version__ = "0.1.0"
