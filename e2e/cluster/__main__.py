"""``python -m e2e.cluster``: run the local control plane.

  up      [--dir D] [--nodes N] [--scheduler] [node options]   start (idempotent), print kubeconfig
  down    [--dir D] [--purge]                                   stop everything it started
  status  [--dir D]                                             which processes run, with pids
  nodes   [--dir D] --count N [node options]                    create or update fake nodes
  compact [--dir D]                                             compact etcd history (410 Gone)
  demo    [--dir D] [--nodes N] [--no-dra]                      Caldera runs the example jobs

Node options: --cpu 32 --memory 256Gi --pods 110 --gpu N --label k=v (repeatable) --prefix NAME-
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from e2e.cluster.control_plane import (
    DEFAULT_DIR,
    RACK_LABEL,
    SPINE_LABEL,
    ClusterError,
    ControlPlane,
    NodeSpec,
    parse_labels,
)


def _node_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cpu", default="32", help="cpu of each node (default 32)")
    p.add_argument("--memory", default="256Gi", help="memory of each node (default 256Gi)")
    p.add_argument("--pods", default="110", help="pod capacity of each node (default 110)")
    p.add_argument("--gpu", default=None, help="nvidia.com/gpu of each node (default none)")
    p.add_argument("--label", action="append", default=[], help="node label key=value")
    p.add_argument("--prefix", default="kwok-node-", help="node name prefix (default kwok-node-)")


def _spec(args: argparse.Namespace) -> NodeSpec:
    return NodeSpec(
        cpu=args.cpu,
        memory=args.memory,
        pods=args.pods,
        gpu=args.gpu,
        labels=parse_labels(args.label),
    )


def _demo(plane: ControlPlane, args: argparse.Namespace) -> int:
    from e2e.cluster.caldera_processes import run_demo_jobs, start_caldera

    kubeconfig = plane.up()
    plane.create_nodes(args.nodes, _spec(args), args.prefix)
    start_caldera(plane)
    say = sys.stderr.write
    say("Caldera's webhook, controllers and scheduler run on the local control plane.\n")
    say("Running examples/tensorflow-job.yaml (2 ps + 4 workers) and examples/mpi-job.yaml\n")
    say("(1 launcher + 2 workers), both gang-scheduled:\n")
    phases = run_demo_jobs(plane)
    print(plane.kubectl("get", "jobs.batch.volcano.sh,pods", "-o", "wide"))
    if args.dra:
        from e2e.cluster.dra_demo import run_dra_demo, start_driver

        say("Dynamic Resource Allocation: the fake DRA driver publishes 8 GPUs per node, and\n")
        say("examples/dra-gpu-job.yaml's 2 workers claim one each through a claim template:\n")
        start_driver(plane)
        dra_phase = run_dra_demo(plane)
        if dra_phase != "skipped":
            phases["dra-gpu-job"] = dra_phase
    ended = ", ".join(f"{name} {phase}" for name, phase in phases.items())
    say(f"Jobs ended: {ended}. Use the cluster with:\n")
    say(f"  export KUBECONFIG={kubeconfig}\n")
    say("  kubectl get vcjob,pg,queue   # Volcano's short names work\n")
    say("  caldera queue pending default  # the waiting jobs in order (the visibility API)\n")
    say("  make down                    # stops Caldera and the control plane\n")
    return 0 if all(p == "Completed" for p in phases.values()) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.cluster",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--dir", type=Path, default=DEFAULT_DIR, help=f"cluster directory ({DEFAULT_DIR})"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the control plane")
    up.add_argument("--nodes", type=int, default=0, help="fake nodes to create (default 0)")
    up.add_argument("--scheduler", action="store_true", help="also start kube-scheduler")
    _node_options(up)
    down = sub.add_parser("down", help="stop the control plane")
    down.add_argument("--purge", action="store_true", help="also delete its data and certificates")
    sub.add_parser("status", help="show running processes")
    nodes = sub.add_parser("nodes", help="create fake nodes")
    nodes.add_argument("--count", type=int, required=True)
    _node_options(nodes)
    topo = sub.add_parser(
        "topology",
        help=f"create fake nodes in racks under spines (labels {RACK_LABEL}, {SPINE_LABEL})",
    )
    topo.add_argument("--spines", type=int, default=2)
    topo.add_argument("--racks-per-spine", type=int, default=2)
    topo.add_argument("--nodes-per-rack", type=int, default=4)
    _node_options(topo)
    sub.add_parser("compact", help="compact etcd history")
    demo = sub.add_parser("demo", help="start Caldera on the cluster and run an example job")
    demo.add_argument("--nodes", type=int, default=4, help="fake nodes (default 4)")
    demo.add_argument(
        "--no-dra",
        dest="dra",
        action="store_false",
        help="leave out the DRA example (it skips itself when the scheduler does not do DRA)",
    )
    _node_options(demo)
    args = parser.parse_args(argv)

    plane = ControlPlane(args.dir)
    try:
        if args.command == "up":
            kubeconfig = plane.up(scheduler=args.scheduler)
            made = plane.create_nodes(args.nodes, _spec(args), args.prefix)
            if made:
                print(f"fake nodes: {', '.join(made)}", file=sys.stderr)
            print(f"control plane up at {plane.server}; use it with:", file=sys.stderr)
            print(f"  export KUBECONFIG={kubeconfig}", file=sys.stderr)
            print("  kubectl get nodes", file=sys.stderr)
            print(kubeconfig)
        elif args.command == "down":
            stopped = plane.down(purge=args.purge)
            print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
        elif args.command == "status":
            for name, pid in plane.running().items():
                print(f"{name:26} {'running, pid ' + str(pid) if pid else 'stopped'}")
        elif args.command == "nodes":
            print("\n".join(plane.create_nodes(args.count, _spec(args), args.prefix)))
        elif args.command == "topology":
            where = plane.create_topology_nodes(
                args.spines,
                args.racks_per_spine,
                args.nodes_per_rack,
                _spec(args),
                prefix=args.prefix,
            )
            for node, (rack, spine) in where.items():
                print(f"{node} {rack} {spine}")
        elif args.command == "compact":
            print(f"compacted etcd at revision {plane.compact_etcd()}")
        elif args.command == "demo":
            return _demo(plane, args)
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
