"""The scheduler (``caldera scheduler``): Volcano's session, actions and plugins over a snapshot
kept up to date from the informer cache. docs/architecture.md draws the whole; the pure core is
``framework``, ``actions``, ``plugins``, ``api``, ``snapshot``, ``live_snapshot``, ``quiet``,
``why`` and ``conf`` (an import-linter contract keeps them free of I/O), and the I/O is
``process`` and ``main``. Each layer imports only those below it (an import-linter contract:
api < why < framework < plugins < actions < the process; docs/architecture.md's import rules).

The process:

- `scheduler.main`: start-up, leadership and shutdown around the session loop;
- `scheduler.process`: `SchedulerLoop`, the session loop and its I/O (binds with assumed pods,
  evictions, PodGroup and Queue status, pod conditions, Events); `ConfSource` re-reads the
  configuration file;
- `scheduler.status_writer`: `StatusWriter`, the status writes sent apart from the sessions
  (coalesced by object, bounded in flight, retried); `scheduler.status_queue`:
  `PendingWrites`, its pure bookkeeping;
- `scheduler.status_patch`: a PodGroup's status as a merge patch of what changed, and
  `AssumedPodGroups`, the PodGroups as decided until the cache shows the writes;
- `scheduler.metrics`: `SchedulerMetrics`, the Prometheus metrics under Volcano's names;
- `scheduler.registry`: the actions and plugins of this build, by configuration name;
- `scheduler.conf`: the configuration file in Volcano's format, parsed strictly.

The snapshot and what the scheduler writes:

- `scheduler.api.types`: `TaskInfo`, `JobInfo`, `NodeInfo`, `QueueInfo`, `ClusterInfo`, the
  session's view of pods, PodGroups, nodes and queues;
- `scheduler.api.fit`: whether a request fits a node, with Kubernetes' reasons;
- `scheduler.api.task_topology`: a job's task topology, from its PodGroup's annotations;
- `scheduler.snapshot`: `build_cluster`, a `ClusterInfo` from the cached objects;
- `scheduler.live_snapshot`: `LiveSnapshot`, the same `ClusterInfo` kept across sessions and
  derived again only where the cache changed;
- `scheduler.quiet`: `QuietSessions`, whether the next session may be skipped;
- `scheduler.why`: the record of why a job waits, composed from the session's notes.
- `scheduler.visibility`: the waiting jobs in the order the session serves them, served as
  the aggregated API ``visibility.caldera.dev`` (``order`` and ``answers`` are pure and sit
  below the framework, which calls ``pending_order`` as a session closes; ``server`` is the
  process's HTTPS endpoint).

The framework (Volcano's ``pkg/scheduler/framework``):

- `scheduler.framework.plugin`: the `Plugin` and `Action` protocols, their `Arguments`, the
  `CallbackKind`s a plugin registers (with Volcano's switches), and `SchedulerConf`, what a
  session runs;
- `scheduler.framework.session`: `Session`, the callbacks plugins register, how tiers combine
  them, and the `SessionResult`;
- `scheduler.framework.incremental`: the incremental layer, what makes plugins fast across
  sessions and that a plugin opts into in one place (`Speedups`: sort keys, a victim screen,
  the allocatable state; memos per job and per cluster; the settled jobs);
- `scheduler.framework.statement`: `Statement`, a gang's placements committed whole or undone;
- `scheduler.framework.status`: each PodGroup's status and each queue's allocation after a
  session;
- `scheduler.framework.runner`: `run_session`, one cycle: plugins open, actions run, plugins
  close, status derived.

The actions (``pkg/scheduler/actions``): `enqueue`, `allocate`, `backfill`, `preempt`,
`reclaim`; with `scheduler.actions.placer` (a pod's best node, re-evaluating only changed nodes)
and `scheduler.actions.room` (the node walk preempt and reclaim share to make room by eviction).

The plugins (``pkg/scheduler/plugins``), one module each: `gang`, `priority`, `drf`,
`proportion`, `binpack`, `nodeorder`, `predicates`, `task_topology`, `conformance`,
`overcommit`, `preemption_toleration`; `example_rank` is the example of docs/architecture.md's
"Writing a plugin" (not registered).
"""
