"""Input and output processing as AWS applies it: InputPath, Parameters, ResultPath, OutputPath."""

from __future__ import annotations

from typing import Any

from .paths import Path, ReferencePath


def select(path: Path | None, data: Any, context: Any) -> Any:
    """InputPath or OutputPath: a JSON null path gives {}, otherwise what the path selects."""
    return {} if path is None else path.resolve(data, context)


def place_result(result_path: ReferencePath | None, state_input: Any, result: Any) -> Any:
    """ResultPath: null discards the result; otherwise the result is written into the state's raw input."""
    return state_input if result_path is None else result_path.write(state_input, result)
