"""A client's side of a ``--clock virtual`` server's clock operations (served by api/clock.py: ``X-Amz-Target:
Statewright.GetClock`` and ``Statewright.AdvanceClock``), for ``statewright clock now|advance`` and the test server.

Imports nothing from the rest of statewright: a test session loads it without the server's modules.
"""

from __future__ import annotations

import json
import urllib.request

TARGET_PREFIX = "Statewright."  # api/clock.py's; spelled here so the client loads nothing of the server


def call(endpoint: str, operation: str, body: dict, timeout_s: float = 30) -> dict:
    """A client's call of GetClock or AdvanceClock at the server at ``endpoint``: its answer. Raises
    urllib.error.HTTPError for a refusal (its body holds the message) and OSError when unreachable."""
    request = urllib.request.Request(endpoint, data=json.dumps(body).encode(), method="POST", headers={
        "X-Amz-Target": f"{TARGET_PREFIX}{operation}", "Content-Type": "application/x-amz-json-1.0"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # a local server, not via a proxy
    with opener.open(request, timeout=timeout_s) as answer:
        return json.loads(answer.read())
