"""``caldera dashboard``: a read-only web view of the cluster from one shared informer cache.

Pure cores (no I/O; unit-tested over plain objects):

- `dashboard.format`: ages and amounts as a person reads them;
- `dashboard.overview`: the overview page's model (the queue tree with its bars, nodes, GPUs);
- `dashboard.jobs`: the job list's filter, its rows and their order (pending first);
- `dashboard.jobpage`: one job's page (tasks, pods, PodGroup, why, timeline, Events);
- `dashboard.topics`: which live pages a change of a cached object touches.

I/O shell:

- `dashboard.cache`: the informers (queues, PodGroups, Jobs, pods, nodes, PriorityClasses) and
  what the user's RBAC lets them list; Events read on demand for a job page;
- `dashboard.live`: the hub of server-sent-event clients, bounded in number and in queue;
- `dashboard.server`: the aiohttp routes rendering the models through Jinja2 templates;
- `dashboard.app`: the process: connect, check access, sync, serve until interrupted.

The dashboard never writes to the API server: its client carries a fence that is never open
(`caldera.kube.fence.Fence`), so a write would be dropped before it is sent.
"""
