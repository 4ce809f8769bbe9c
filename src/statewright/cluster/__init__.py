"""Several engine nodes on one store: shard leases and membership, forwarding commands to a shard's owner, and the
channel and the calls between nodes. Below the API, above the engine; node.py wires it."""
