"""The chaos run: a seeded burst of Volcano Jobs while Caldera's processes are killed, the API
server restarts, etcd compacts and connections drop; then the invariants a platform team asks
about, checked from the pods themselves (docs/reliability.md has the figures).

- `workload.py`: the jobs and the final phase each one must reach (pure).
- `faults.py`: the fault plan drawn from the seed (pure).
- `checks.py`: the invariants over the observed pod lives and final objects (pure).
- `proxy.py`: a TCP proxy per process, so one process's connections can be cut or stalled.
- `fleet.py`: the processes: replicas, kills, restarts, crash watch, restart and failover times.
- `run.py`: one run on a local control plane, returning a `Report`.
- `fencing.py`: the fencing rounds: a leader paused or stalled past its Lease, and the writes it
  makes after the standby took over (from the audit log).
"""
