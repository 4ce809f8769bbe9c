"""Several engine nodes on one store: shard leases and membership."""
