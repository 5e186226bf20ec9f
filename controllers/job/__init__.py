"""The Volcano Job controller: its pure core, its plugins and its reconcile loop.

The pure core (Volcano's pkg/controllers/job/), kept free of I/O by an import-linter contract
(docs/architecture.md):

- `controllers.job.events`: informer notifications → `Request` (job_controller_handler.go), and
  `events_first`, the order in which one reconcile handles its batch;
- `controllers.job.inbox`: a Job's inbox (requests, Commands, timers) and one reconcile's
  drain of it, `Batch.decide`: what each item calls for (a timer to arm, a decision to run now,
  a sync to post), the decision path the simulator's job controller runs too;
- `controllers.job.execution`: which way a decision goes (nothing, hold, refuse, run its plan)
  and `status_after`, the status it leaves;
- `controllers.job.policy`: `Request` → `Decision` (action, delay, target), and the
  `DelayedActions` bookkeeping of policy timeouts (`applyPolicies` in job_controller_util.go);
  `policy_problems`, the policies no controller runs; `on_failure`, TerminateJob at the retry
  limit (`handleJobError` in job_controller.go);
- `controllers.job.state`: the state machine: `plan` per action and state, `kill_victims`,
  `next_phase`, `apply_plan` (state/*.go, killJob in job_controller_actions.go), and
  `refusal_plan`, the termination of a Job that can never run;
- `controllers.job.status`: pod counting, conditions, runningDuration and change detection;
  the controlledResources a sync records and a kill drops (`with_controlled`);
- `controllers.job.sync`: `plan_sync`, the pods a sync creates (at most 500, found lazily) and
  deletes, with the PodGroup gate and dependsOn (syncJob in job_controller_actions.go);
- `controllers.job.bounds`: the Jobs held instead of run: over the bounds of
  `caldera.api.limits` (reason SpecOverLimits), or with a svc name no Service can take;
  `sync_blocker`, which of those (or a pod template the API server refuses) stops a sync;
  `note_holds`, what a Job whose pods others' objects hold back says and tells;
- `controllers.job.pods`: the pods, PVCs and PodGroup a Job gets, with deterministic names
  (a pod's and its PVCs' from `caldera.api.names`);
- `controllers.job.pending`: the ``PodGroupPending`` Event a Job gets while its PodGroup waits;
- `controllers.job.plugins`: the job plugins (env, svc, ssh, tensorflow, pytorch, mpi, ray,
  hcclrank, mxnet);
- `controllers.job.created`: the pods created but not yet in the cache (bookkeeping, the clock
  passed in), so a reconcile does not create them twice.

Around it:

- `controllers.job.controller`: `JobController`, the informer handlers and the reconcile that
  reads the cache, calls the pure core and writes (all the I/O but PVCs');
- `controllers.job.pvc_throttle`: `PvcCreator`, process-wide, fair, rate-limited PVC creation.
"""
