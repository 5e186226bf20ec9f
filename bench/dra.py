"""Dynamic Resource Allocation side by side: kube-scheduler 1.36 (its DynamicResources plugin)
and ``caldera scheduler`` on the same ResourceSlices, DeviceClass and claims.

    .venv/bin/python bench/dra.py                    # throughput (1,000 pods) and the cases
    .venv/bin/python bench/dra.py --only throughput  # 1,000 pods on 100 nodes x 8 GPUs
    .venv/bin/python bench/dra.py --only cases       # which small cases each one allocates
    .venv/bin/python bench/dra.py --smoke            # CI: 100 pods on 10 nodes, and the cases

A local control plane of its own (temporary directory; kube-controller-manager's resourceclaim
controller makes each pod's claim from its template) with kwok nodes and the fake DRA driver
(``e2e/fake_dra_driver.py``): one ResourceSlice of 8 GPUs per node and the DeviceClass
``gpu.fake.caldera.dev``.

Throughput (goal: Caldera's binds/s >= kube-scheduler's): N pods, each with one claim of one
GPU from a ResourceClaimTemplate, on nodes x 8 GPUs. 1,000 pods on 100 nodes is 800 GPUs: 800
pods fit and 200 stay pending, a backlog both schedulers keep trying. Each scheduler's round
runs in a namespace of its own, its pods created and their claims made before the scheduler
starts (kube-scheduler, as in ``bench/scheduler.py --e2e``, with ``--kube-api-qps/burst`` 2000;
Caldera with its default configuration and one PodGroup of minMember 1 per pod); the rate is
(fit - 1) / (last bind - first bind), seen on a watch. Then every allocation is checked
(``bench/_dra_check.py``: no device twice, each device on the pod's node and of the class, the
count right, no claim left allocated to no bound pod) and the namespace deleted, freeing the
GPUs for the next round.

Cases (``bench/_dra_cases.py``): counts, ``All``, CEL selectors, ``matchAttribute``,
``firstAvailable``, two claims, a shared claim, a node that fits two pods of three; each on
nodes of its own. Reported per case: the pods each scheduler bound with valid allocations; the
goal is that Caldera allocates whenever kube-scheduler does.

A Caldera that does not do DRA binds the pods without allocating their claims: the benchmark
then says "caldera: not supported by this checkout" for that side and still exits 0. It exits
0 when a goal is missed (it says MISS), 1 when something broke or an allocation is invalid.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

REPO: Final = Path(__file__).resolve().parent.parent
if sys.path[:1] != [str(REPO)]:  # first, before bench/ itself (bench/dra.py is no package)
    sys.path.insert(0, str(REPO))

from bench._dra_cases import CASES, Case, case_of, objects, pods  # noqa: E402
from bench._dra_check import Verdict, check, waiting_reason  # noqa: E402
from bench.scheduler import (  # noqa: E402
    QPS,
    PodWatch,
    create_ready_nodes,
    machine,
    make_namespace,
    wait_done,
)
from caldera.api.kinds import NAMESPACE, PODGROUP, KindInfo  # noqa: E402
from caldera.kube.client import ClientOptions, KubeClient  # noqa: E402
from caldera.kube.errors import NotFound  # noqa: E402
from caldera.obs.logging import configure_logging  # noqa: E402
from e2e.dra_kinds import (  # noqa: E402
    POD_JSON,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_SLICE,
    Json,
    claim_template,
    pod_with_claims,
)
from e2e.fake_dra_driver import DRIVER, FakeDraDriver, NodeGpus  # noqa: E402

if TYPE_CHECKING:
    from e2e.caldera_process import CalderaProcess
    from e2e.cluster.control_plane import ControlPlane

CRD_DIR: Final = REPO / "charts" / "caldera" / "crds"
GROUP_ANNOTATION: Final = "scheduling.k8s.io/group-name"
SCHEDULER_NAMES: Final = {"kube-scheduler": "default-scheduler", "caldera": "volcano"}
NOT_SUPPORTED: Final = "caldera: not supported by this checkout"


@dataclass
class Round:
    """One scheduler's result: binds/s (throughput) and the verdict on its allocations."""

    who: str
    rate: float
    verdict: Verdict
    error: str = ""

    @property
    def supported(self) -> bool:
        return self.verdict.unallocated == 0


# ---- cluster set-up -----------------------------------------------------------------------------


async def make_nodes(kube: KubeClient, names: Iterable[str], labels: dict[str, str]) -> list[str]:
    """kwok nodes (created, given capacity through the status subresource, Ready)."""
    from e2e.cluster.control_plane import NodeSpec

    spec = NodeSpec(cpu="64", memory="256Gi", pods="110", labels=labels)
    return await create_ready_nodes(kube, list(names), spec)


async def create_all(
    kube: KubeClient, kind: KindInfo[Any], bodies: list[Json], namespace: str
) -> None:
    gate = asyncio.Semaphore(64)

    async def one(body: Json) -> None:
        async with gate:
            await kube.create(kind, body, namespace=namespace)

    await asyncio.gather(*(one(b) for b in bodies))


def group_of(name: str) -> dict[str, str]:
    return {GROUP_ANNOTATION: name}


def no_annotations(_name: str) -> dict[str, str]:
    return {}


async def create_pods(kube: KubeClient, who: str, bodies: list[Json], namespace: str) -> None:
    """The pods, with a PodGroup of minMember 1 each for Caldera (what Volcano's PodGroup
    controller would make for a plain pod); then wait until every claim is made."""
    if who == "caldera":
        groups = [
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": b["metadata"]["name"]},
                "spec": {"minMember": 1, "queue": "default"},
            }
            for b in bodies
        ]
        await create_all(kube, PODGROUP, groups, namespace)
    await create_all(kube, POD_JSON, bodies, namespace)
    wanted = sum(
        1
        for b in bodies
        for ref in b["spec"]["resourceClaims"]
        if "resourceClaimTemplateName" in ref
    )
    made = 0
    for _ in range(600):
        listed = await kube.list(POD_JSON, namespace=namespace)
        made = sum(
            1
            for pod in listed.items
            for status in (pod.get("status") or {}).get("resourceClaimStatuses") or []
            if status.get("resourceClaimName")
        )
        if made >= wanted:
            return
        await asyncio.sleep(0.2)
    raise RuntimeError(f"only {made}/{wanted} claims made from templates in {namespace}")


async def drop_namespace(kube: KubeClient, namespace: str, limit: float = 180) -> None:
    """Delete the namespace and wait until its claims are gone (their devices free again).
    The pods go first, at once (grace 0): the namespace controller alone takes minutes for a
    thousand of them on a busy machine."""
    body = b'{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0}'
    path = f"/api/v1/namespaces/{namespace}/pods"
    # One request deletes them all, one by one on the server: minutes on a loaded machine.
    await kube.request("DELETE", path, body=body, timeout=limit)
    with contextlib.suppress(NotFound):
        await kube.delete(NAMESPACE, namespace)
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if not (await kube.list(RESOURCE_CLAIM, namespace=namespace)).items:
            return
        await asyncio.sleep(0.5)
    raise RuntimeError(f"the claims of {namespace} were not deleted in {limit:.0f}s")


# ---- the schedulers -----------------------------------------------------------------------------


class Schedulers:
    """Starts and stops kube-scheduler or ``caldera scheduler`` on the plane."""

    def __init__(self, plane: ControlPlane, tmp: Path, caldera_conf: Path | None) -> None:
        self.plane, self.tmp, self.caldera_conf = plane, tmp, caldera_conf
        self._caldera: CalderaProcess | None = None

    def start(self, who: str) -> None:
        if who == "kube-scheduler":
            from e2e.cluster.control_plane import binaries

            argv = self.plane._argv("kube-scheduler", binaries())
            argv += [f"--kube-api-qps={QPS}", f"--kube-api-burst={QPS}"]
            self.plane.procs.start("kube-scheduler", argv)
            return
        from e2e.caldera_process import CalderaProcess

        args = ["--leader-elect=false", f"--kube-qps={QPS}", f"--kube-burst={QPS}"]
        args += ["--log-level=warning"]
        if self.caldera_conf:
            args.append(f"--scheduler-conf={self.caldera_conf}")
        self._caldera = CalderaProcess(
            "scheduler", args, kubeconfig=self.plane.kubeconfig, log_dir=self.tmp
        )

    def stop(self, who: str) -> str:
        """Stop it; the end of its log if it failed."""
        if who == "kube-scheduler":
            self.plane.procs.stop("kube-scheduler")
            return ""
        proc, self._caldera = self._caldera, None
        if proc is None:
            return ""
        code = proc.stop()
        return "" if code == 0 else f"exit {code}:\n{proc.log()[-3000:]}"

    def tail(self, who: str) -> str:
        if who == "kube-scheduler":
            return self.plane.procs.tail("kube-scheduler")
        return self._caldera.log()[-3000:] if self._caldera else ""


async def observed(kube: KubeClient, namespace: str) -> tuple[list[Json], list[Json], list[Json]]:
    """The namespace's pods, every claim in the cluster, every slice."""
    pods_ = (await kube.list(POD_JSON, namespace=namespace)).items
    claims = (await kube.list(RESOURCE_CLAIM)).items
    slices = (await kube.list(RESOURCE_SLICE)).items
    return list(pods_), list(claims), list(slices)


def accepts_fake_gpu(_request: str, device: Any) -> bool:
    return bool(device.driver == DRIVER)


# ---- throughput ---------------------------------------------------------------------------------


async def throughput_round(
    kube: KubeClient, schedulers: Schedulers, who: str, count: int, fit: int, limit: float
) -> Round:
    namespace = f"tp-{who}"
    await make_namespace(kube, namespace)
    await kube.create(RESOURCE_CLAIM_TEMPLATE, claim_template("gpu", DRIVER), namespace=namespace)
    annotate: Callable[[str], dict[str, str]] = group_of if who == "caldera" else no_annotations
    bodies = [
        pod_with_claims(
            f"p-{i}", SCHEDULER_NAMES[who], {"gpu": "gpu"}, annotations=annotate(f"p-{i}")
        )
        for i in range(count)
    ]
    await create_pods(kube, who, bodies, namespace)
    load = os.getloadavg()[0]
    error = ""
    async with PodWatch(kube, namespace, fit) as watch:
        schedulers.start(who)
        try:
            await wait_done(watch, limit, who)
        except RuntimeError as exc:
            error = f"{exc}\n{schedulers.tail(who)}"
        finally:
            error += schedulers.stop(who)
    pods_, claims, slices = await observed(kube, namespace)
    mine = [c for c in claims if c["metadata"]["namespace"] == namespace]
    verdict = check(pods_, mine, slices, accepts_fake_gpu, all_claims=claims)
    result = Round(who, watch.rate(), verdict, error)
    if not result.supported and who == "caldera":
        print(f"  {NOT_SUPPORTED} ({verdict.unallocated} pods bound without their claim allocated)")
        result.error = ""
    else:
        print(
            f"  {who}: {verdict.bound} of {count} pods bound, {result.rate:,.0f} binds/s "
            f"(load average {load:.1f} at the start); allocations "
            f"{'valid' if verdict.valid else 'INVALID'}"
        )
        for problem in verdict.problems[:10]:
            print(f"    {problem}")
    dropped = time.monotonic()
    await drop_namespace(kube, namespace)
    print(f"    (its namespace deleted, the claims gone, in {time.monotonic() - dropped:.0f}s)")
    return result


async def bench_throughput(
    kube: KubeClient, schedulers: Schedulers, count: int, node_count: int, limit: float
) -> bool:
    gpus = NodeGpus()
    started = time.monotonic()
    nodes = await make_nodes(kube, (f"tp-{i}" for i in range(node_count)), {})
    driver = FakeDraDriver.uniform(kube, nodes, gpus)
    await driver.publish()
    fit = min(count, node_count * gpus.gpus)
    print(
        f"throughput: {count:,} pods with one claim of one GPU each (from a template) on "
        f"{node_count} kwok nodes x {gpus.gpus} GPUs: {fit:,} fit "
        f"(set-up {time.monotonic() - started:.0f}s)"
    )
    rounds = [
        await throughput_round(kube, schedulers, who, count, fit, limit)
        for who in ("kube-scheduler", "caldera")
    ]
    await driver.cleanup()
    kube_round, caldera = rounds
    ok = kube_round.verdict.valid and not kube_round.error
    if kube_round.error:
        print(f"  kube-scheduler failed: {kube_round.error}")
    if not caldera.supported:
        return ok
    if caldera.error:
        print(f"  caldera failed: {caldera.error}")
        return False
    ratio = caldera.rate / kube_round.rate
    print(
        f"  caldera / kube-scheduler = {ratio:.2f} "
        f"(goal >= 1.0: {'met' if ratio >= 1.0 else 'MISS'})"
    )
    return ok and caldera.verdict.valid


# ---- the cases ----------------------------------------------------------------------------------


async def settle(kube: KubeClient, namespace: str, quiet: float = 5.0, limit: float = 90) -> None:
    """Wait until every pod is bound or marked unschedulable and nothing (binding, or the
    reason a pod waits) changed for ``quiet`` seconds; at most ``limit``. A scheduler's first
    reasons can be passing ones (Caldera says when it is still starting to watch DRA objects)."""
    deadline = time.monotonic() + limit
    last: frozenset[tuple[str, str, str]] = frozenset()
    since = time.monotonic()
    while time.monotonic() < deadline:
        listed = (await kube.list(POD_JSON, namespace=namespace)).items
        state = frozenset(
            (p["metadata"]["name"], (p.get("spec") or {}).get("nodeName") or "", waiting_reason(p))
            for p in listed
        )
        decided = all(node or reason for _, node, reason in state)
        if state != last:
            last, since = state, time.monotonic()
        elif decided and time.monotonic() - since >= quiet:
            return
        await asyncio.sleep(0.3)


async def cases_round(
    kube: KubeClient, schedulers: Schedulers, who: str, cases: tuple[Case, ...]
) -> dict[str, Verdict]:
    namespace = f"cases-{who}"
    await make_namespace(kube, namespace)
    annotate: Callable[[str], dict[str, str]] = group_of if who == "caldera" else no_annotations
    for case in cases:
        for body in objects(case):
            kind = RESOURCE_CLAIM if body["kind"] == "ResourceClaim" else RESOURCE_CLAIM_TEMPLATE
            await kube.create(kind, body, namespace=namespace)
    await create_pods(
        kube,
        who,
        [p for case in cases for p in pods(case, SCHEDULER_NAMES[who], annotate)],
        namespace,
    )
    started = time.monotonic()
    schedulers.start(who)
    try:
        await settle(kube, namespace)
    finally:
        error = schedulers.stop(who)
    print(f"  {who} settled in {time.monotonic() - started:.0f}s")
    if error:
        raise RuntimeError(f"{who} failed: {error}")
    pods_, claims, slices = await observed(kube, namespace)
    mine = [c for c in claims if c["metadata"]["namespace"] == namespace]
    verdicts = {
        case.name: check(
            [p for p in pods_ if case_of(p) == case.name],
            [c for c in mine if c["metadata"]["name"].startswith(f"{case.name}-")],
            slices,
            case.accept,
            all_claims=claims,
        )
        for case in cases
    }
    await drop_namespace(kube, namespace)
    return verdicts


def _cell(verdict: Verdict) -> str:
    if verdict.unallocated:
        return f"{verdict.bound}/{verdict.pods} no alloc"
    return f"{verdict.bound}/{verdict.pods}{'' if verdict.valid else ' INVALID'}"


async def bench_cases(kube: KubeClient, schedulers: Schedulers) -> bool:
    layouts = {node: gpus for case in CASES for node, gpus in case.layouts().items()}
    for case in CASES:
        await make_nodes(kube, case.node_names(), {"caldera.io/dra-case": case.name})
    driver = FakeDraDriver(kube, layouts)
    await driver.publish()
    print(f"cases: {len(CASES)} on {len(layouts)} kwok nodes; pods bound with valid allocations")
    kube_v = await cases_round(kube, schedulers, "kube-scheduler", CASES)
    caldera_v = await cases_round(kube, schedulers, "caldera", CASES)
    await driver.cleanup()
    supported = not any(v.unallocated for v in caldera_v.values())
    print(f"  {'case':26} {'kube-scheduler':>16} {'caldera':>16}  what")
    misses = 0
    for case in CASES:
        k, c = kube_v[case.name], caldera_v[case.name]
        k_ok = k.bound if k.valid else 0
        c_ok = c.bound if c.valid and not c.unallocated else 0
        miss = supported and c_ok < k_ok
        misses += miss
        print(
            f"  {case.name:26} {_cell(k):>16} {_cell(c):>16}  {case.what}{'  MISS' if miss else ''}"
        )
        for problem in (k.problems + (c.problems if supported else []))[:5]:
            print(f"    {problem}")
        if miss:
            for why in c.waiting[:2]:
                print(f"    caldera: {why}")
    ok = all(v.valid for v in kube_v.values())
    if not supported:
        print(f"  {NOT_SUPPORTED} (pods bound without their claims allocated)")
        return ok
    print(
        f"  caldera allocates whenever kube-scheduler does: "
        f"{'met' if not misses else f'MISS in {misses} cases'}"
    )
    return ok and all(v.valid for v in caldera_v.values())


# ---- main ---------------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> bool:
    from e2e.cluster.control_plane import ControlPlane

    count = args.pods or (100 if args.smoke else 1000)
    node_count = args.nodes or (10 if args.smoke else 100)
    limit = 180 if args.smoke else 600
    ok = True
    print(machine())
    with tempfile.TemporaryDirectory(prefix="caldera-dra-") as tmp:
        plane = ControlPlane(Path(tmp) / "cluster")
        try:
            plane.up()
            plane.kubectl("apply", "--server-side", "-f", str(CRD_DIR))
            plane.kubectl(
                "wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRD_DIR)
            )
            schedulers = Schedulers(plane, Path(tmp), args.caldera_conf)
            options = ClientOptions(qps=QPS, burst=QPS)
            async with KubeClient.from_kubeconfig(plane.kubeconfig, options=options) as kube:
                if args.only in (None, "throughput"):
                    ok &= await bench_throughput(kube, schedulers, count, node_count, limit)
                if args.only in (None, "cases"):
                    ok &= await bench_cases(kube, schedulers)
        finally:
            plane.down(purge=True)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--smoke", action="store_true", help="small: 100 pods on 10 nodes, the cases"
    )
    parser.add_argument("--only", choices=("throughput", "cases"), help="one part only")
    parser.add_argument("--pods", type=int, help="pods in the throughput part (default 1,000)")
    parser.add_argument(
        "--nodes", type=int, help="nodes of 8 GPUs in the throughput part (default 100)"
    )
    parser.add_argument("--caldera-conf", type=Path, help="caldera scheduler's configuration file")
    args = parser.parse_args()
    configure_logging(component="bench", level="warning")
    return 0 if asyncio.run(run(args)) else 1


if __name__ == "__main__":
    sys.exit(main())
