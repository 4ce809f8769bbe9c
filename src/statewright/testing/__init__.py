"""Testing workflows against a real statewright server: ``StatewrightServer`` starts one on a free port with its
own data directory, and the pytest plugin (``statewright.testing.plugin``, registered by ``pip install
statewright[testing]``) gives tests fixtures built on it. See the README, "Testing workflows with pytest".
"""

from .server import StatewrightServer, free_port

__all__ = ["StatewrightServer", "free_port"]
