"""Errors raised while running a state: the States.* names AWS uses, carried with a cause."""

RUNTIME = "States.Runtime"
NO_CHOICE_MATCHED = "States.NoChoiceMatched"
DATA_LIMIT_EXCEEDED = "States.DataLimitExceeded"
TIMEOUT = "States.Timeout"


class StatesError(Exception):
    """A failure of the running state, named as AWS names it (States.Runtime, a Fail state's Error, ...)."""

    def __init__(self, error: str, cause: str) -> None:
        super().__init__(f"{error}: {cause}")
        self.error = error
        self.cause = cause
