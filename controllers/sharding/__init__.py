"""Volcano's node sharding: NodeShards from the sharding ConfigMap."""
