"""The Kubernetes API client: the only package that talks to the API server's wire and to
kubernetes-asyncio (an import-linter contract; docs/architecture.md).

- `caldera.kube.config`: `load_config`, the server URL, TLS context and `Auth` from a kubeconfig
  or the in-cluster service account (kubernetes-asyncio's loaders), with token refresh;
- `caldera.kube.client`: `KubeClient` over one aiohttp session (get, list, create, replace,
  patch, delete, bind, evict, and watches read through `WatchStream`), the pure request
  builders, retries, client-side rate limiting and the client's metrics;
- `caldera.kube.errors`: the typed errors (`NotFound`, `Conflict`, `Gone`, ...) built from the
  server's Status, and `ApiConnectionError` for answers that never came;
- `caldera.kube.events`: `EventRecorder`, aggregated core/v1 Events written in the background;
- `caldera.kube.leader`: `LeaderElector`, leader election on a coordination.k8s.io Lease.
"""
