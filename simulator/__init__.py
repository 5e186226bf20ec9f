"""The simulator (``caldera simulate``, docs/simulator.md): a trace of Volcano Jobs on a virtual
cluster, in virtual time, decided by the scheduler's and the job controller's own pure code.

Input:

- `simulator.spec`: the cluster file and trace formats, decoded into a `Scenario`;
- `simulator.admission`: Jobs and Queues admitted with the webhooks' defaulting and validation;
- `simulator.loading`: reading the files and the scheduler configuration (an edge: files).

The loop:

- `simulator.engine`: `Simulation`, the discrete-event loop, and `simulate`, one run per mode;
- `simulator.timeline`: the queue of actions due at virtual times;
- `simulator.world`: the API server and informers it stands in for, telling watchers of changes;
- `simulator.controller`: the job controller's decision path (controllers.job.inbox and
  execution) on the world, Commands included;
- `simulator.kubelet`: pods start after the bind delay and end as their workload says;
- `simulator.baselines`: the modes: the configured scheduler, pod by pod, FIFO without queues,
  EASY backfill; `simulator.easy` is EASY's pure plan, `simulator.runtimes` the run times it
  is told (the trace's);
- `simulator.stepping`: the same loop one session at a time, every session run, for tests that
  reason about the sequence of decisions (the scheduler's settle property test).

Output:

- `simulator.record` and `simulator.results`: what a run shows, and its JSON;
- `simulator.summary`: the figures that compare runs, and the text table;
- `simulator.report`: the HTML report with matplotlib plots (an edge: it writes the file);
- `simulator.experiments`: the seed experiments of examples/experiments/ (``make experiments``);
- `simulator.synthetic`: a seeded trace of a busy GPU cluster (benchmark, smoke test);
- `simulator.gang_mix`: a seeded trace of many small GPU jobs and a few large gangs (the
  large-gangs experiment).

An import-linter contract keeps the whole package free of the API client, informers, aiohttp
and asyncio.
"""
