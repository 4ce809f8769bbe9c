"""Activity workers: run a Python function for every task a Step Functions activity hands out.

Built on boto3 alone, so the same worker runs against statewright or AWS::

    from statewright.worker import Worker

    class PaymentDeclined(Exception):
        pass

    def charge(order):                      # the task's input, parsed
        if order["amount"] > 100:
            raise PaymentDeclined("over the limit")   # -> SendTaskFailure(error="PaymentDeclined", cause=...)
        return {"charged": order["amount"]}           # -> SendTaskSuccess(output=...)

    Worker(activity_arn, charge, endpoint_url="http://127.0.0.1:8083", heartbeat_seconds=10).run()

``python -m statewright.worker ACTIVITY_ARN module:function`` does the same from a shell. The public surface is
``Worker`` and ``error_of``; the rest is private. Must not import anything from statewright outside this package.
"""

from .runner import Worker, error_of

__all__ = ["Worker", "error_of"]
