"""The Volcano Job controller: its pure core, and (elsewhere) its reconcile loop and plugins.

The pure core, no I/O anywhere (VOLCANO_API.md section 2):

- `controllers.job.events`: informer notifications → `Request` (section 2.1);
- `controllers.job.policy`: `Request` → `Decision` (action, delay, target), and the
  `DelayedActions` bookkeeping of policy timeouts (section 2.2);
- `controllers.job.state`: the state machine: `plan` per action and state, `kill_victims`,
  `next_phase`, `apply_plan` (sections 2.3, 2.4, 2.6);
- `controllers.job.status`: pod counting, conditions, runningDuration, change detection and
  `plan_sync` for pod creation and deletion (sections 1.1, 2.5).
"""
