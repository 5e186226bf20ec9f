"""The Volcano Job controller: its pure core, and (elsewhere) its reconcile loop and plugins.

The pure core, no I/O anywhere (Volcano's pkg/controllers/job/):

- `controllers.job.events`: informer notifications → `Request` (job_controller_handler.go);
- `controllers.job.policy`: `Request` → `Decision` (action, delay, target), and the
  `DelayedActions` bookkeeping of policy timeouts (`applyPolicies` in job_controller_util.go);
- `controllers.job.state`: the state machine: `plan` per action and state, `kill_victims`,
  `next_phase`, `apply_plan` (state/*.go, killJob in job_controller_actions.go);
- `controllers.job.status`: pod counting, conditions, runningDuration, change detection and
  `plan_sync` for pod creation and deletion (syncJob in job_controller_actions.go).
"""
