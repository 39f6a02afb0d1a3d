"""One run of a task: the runner (inside the Spark driver), spark-submit of it, leases, fencing
and commits (`runs`), the pre-check that skips a run, and a warm pool's worker and lifecycle
(`worker`, `warm_pool`)."""
