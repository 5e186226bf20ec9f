"""``caldera dashboard``: the web dashboard on this machine, with the user's own kubeconfig.

It listens on 127.0.0.1 only and shows what the user's credentials may list (`dashboard.app`
checks that first and says what to do when it may not). With ``--in-cluster`` (the chart's
Deployment) it listens where ``--address`` says and serves every user who brings a token, each
seeing what their own RBAC allows. Its flags are in `cli.commands`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from caldera.kube.config import ConfigError
from caldera.kube.errors import ApiConnectionError, ApiError
from caldera.obs.logging import configure_logging
from cli.cluster import describe_error
from cli.errors import fail
from dashboard.app import AccessError, DashboardOptions, connect, reviewer, serve

LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


def _ready(url: str, hidden: tuple[str, ...]) -> None:
    print(f"Caldera dashboard: {url}  (Ctrl-C stops it)", flush=True)
    if hidden:
        print(f"note: you may not list {', '.join(hidden)}; the pages leave them out", flush=True)


def run_dashboard(args: argparse.Namespace) -> int:
    """Serve until interrupted; one line and exit code 1 on any failure to start."""
    if not 0 <= args.port <= 65535:
        return fail(f"--port {args.port}: not a port number (0-65535)", code=2)
    if not args.in_cluster and args.address not in LOOPBACK:
        return fail(
            f"--address {args.address}: without --in-cluster the dashboard shows what your own "
            "credentials may read, so it listens on a loopback address only",
            code=2,
        )
    if args.in_cluster and args.namespace:
        return fail("--in-cluster watches every namespace: leave out -n", code=2)
    configure_logging(
        component="dashboard",
        level="info" if args.in_cluster else "warning",
        fmt="json" if args.in_cluster else "console",
    )
    options = DashboardOptions(
        host=args.address,
        port=args.port,
        namespace=args.namespace or None,
        in_cluster=args.in_cluster,
    )

    async def main() -> int:
        try:
            client = await connect(args.kubeconfig, args.context, args.master)
        except ConfigError as exc:
            return fail(str(exc))
        gate_client = reviewer(client) if args.in_cluster else None
        try:
            await serve(client, options, on_ready=_ready, review_client=gate_client)
        except AccessError as exc:
            return fail(str(exc))
        except (ApiError, ApiConnectionError) as exc:
            return fail(describe_error(exc, client.settings.host))
        except TimeoutError:
            return fail("the cache did not fill within 2 minutes: is the API server slow?")
        except OSError as exc:
            return fail(f"cannot listen on {args.address}:{args.port}: {exc.strerror or exc}")
        finally:
            await client.close()
            if gate_client is not None:
                await gate_client.close()
        return 0

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 0
