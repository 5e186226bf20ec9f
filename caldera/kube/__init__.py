"""The Kubernetes API client: the only package that talks to the API server's wire and to
kubernetes-asyncio (an import-linter contract; docs/architecture.md).

- `caldera.kube.config`: `load_config`, the server URL, TLS context and `Auth` from a kubeconfig
  or the in-cluster service account (kubernetes-asyncio's loaders), with token refresh;
- `caldera.kube.client`: `KubeClient` over one aiohttp session (get, list, create, replace,
  patch, delete, bind, evict, watch): sends, retries, rate-limits and counts (its metrics);
- `caldera.kube.requests`: sans-I/O request building: queries, bodies, delete options, patch
  requests, Binding and Eviction bodies;
- `caldera.kube.retry`: the retry rule (`retry_delay`, `RetryOptions`) and `connection_error`,
  which maps aiohttp failures to `ApiConnectionError`;
- `caldera.kube.watch`: `WatchStream`, the events of one WATCH response, split into lines and
  decoded;
- `caldera.kube.errors`: the typed errors (`NotFound`, `Conflict`, `Gone`, ...) built from the
  server's Status, and `ApiConnectionError` for answers that never came;
- `caldera.kube.events`: `EventRecorder`, aggregated core/v1 Events written in the background;
- `caldera.kube.leader`: `LeaderElector`, leader election on a coordination.k8s.io Lease;
- `caldera.kube.fence`: `Fence`, which stops a leader's writes once its Lease may have passed
  (`FencedError`), checked by `KubeClient` before every write.
"""
