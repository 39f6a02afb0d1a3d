"""The cluster: Spark pools, their liveness probes, allocation strategies and the rebalance."""
