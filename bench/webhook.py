"""Admission webhook throughput and latency, beside a do-nothing aiohttp handler.

    .venv/bin/python -m bench.webhook              # full run (about a minute)
    .venv/bin/python -m bench.webhook --smoke      # CI: a second per measurement
    .venv/bin/python -m bench.webhook --runs 5     # the goal in five consecutive runs

Each server runs in its own process (one asyncio loop, as `caldera webhook` runs) and serves HTTPS
with a certificate from a throw-away CA, as the API server would call it, over keep-alive
connections (the API server reuses them too). The load generator is `bench/loadgen/main.go`
(standard library only, built with the local `go`), because a Python client costs more CPU per
request than the server it measures; without Go the bench falls back to an aiohttp client in
this process and says so.

Servers:
- `noop`: an aiohttp handler that reads the body and answers a constant allowed review: the
  ceiling this machine, Python and aiohttp put on any webhook;
- `validate`, `mutate`: Caldera's `/jobs/validate` and `/jobs/mutate` (metrics included) over
  an in-memory queue view, for the realistic 3-task pytorch job of `unit.webhook_fixtures`.

Measurements:
- fixed rate: requests are sent on a fixed schedule (open loop), and latency counts from the
  scheduled send time, so a slow server is charged for the queue it causes (no coordinated
  omission); p50, p99, p99.9 and errors;
- capacity: closed loop with 32 requests in flight for a few seconds, reviews per second.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry

# `make bench-smoke` runs `python bench/webhook.py`: the test helpers (e2e/, unit/) are not
# installed packages, so the repository root must be on the path.
REPO: Final = Path(__file__).resolve().parent.parent
if sys.path[:1] != [str(REPO)]:  # first, before bench/ itself (bench/scheduler.py is no package)
    sys.path.insert(0, str(REPO))

from e2e.cluster.control_plane import free_port  # noqa: E402
from e2e.cluster.pki import ensure_pki, write_serving_pair  # noqa: E402
from unit.webhook_fixtures import queue, review, three_task_job  # noqa: E402
from webhooks.review import Admission, AdmissionOptions  # noqa: E402
from webhooks.server import CertificateReloader, WebhookMetrics, build_app  # noqa: E402
from webhooks.view import StaticView  # noqa: E402

GOAL_P99_MS: Final = 10.0
NOOP_ANSWER: Final = json.dumps(
    {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "", "allowed": True},
    }
).encode()


# --- the server side (run in a child process) ---------------------------------------------------


class GcPauses:
    """The server's garbage collector pauses since the last read (``GET /bench/gc``): a
    pause longer than the goal would be the tail's cause."""

    def __init__(self) -> None:
        self.started = 0.0
        self.pauses: list[float] = []
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self.started = time.perf_counter()
        else:
            self.pauses.append((time.perf_counter() - self.started) * 1000)

    async def read(self, _request: web.Request) -> web.Response:
        pauses, self.pauses = self.pauses, []
        body = {"count": len(pauses), "max_ms": max(pauses, default=0.0)}
        return web.json_response(body)


async def _noop(request: web.Request) -> web.Response:
    await request.read()
    return web.Response(body=NOOP_ANSWER, content_type="application/json")


def _app(kind: str) -> web.Application:
    if kind == "noop":
        app = web.Application(client_max_size=7 * 1024 * 1024)
        app.router.add_post("/jobs/validate", _noop)
        app.router.add_post("/jobs/mutate", _noop)
    else:
        admission = Admission(StaticView([queue("default")]), AdmissionOptions())
        app = build_app(admission, WebhookMetrics(CollectorRegistry()), client_max_size=7 << 20)
    app.router.add_get("/bench/gc", GcPauses().read)
    return app


async def _serve(kind: str, port: int, cert: str, key: str, reload: bool = False) -> None:
    app = _app(kind)
    watching: asyncio.Task[None] | None = None
    if reload:
        # As `caldera webhook` serves: the reloader's context, files looked at every 0.2 s.
        certs = CertificateReloader(cert, key)
        ctx = certs.context
        watching = asyncio.create_task(certs.watch(0.2))

        async def reloads(_request: web.Request) -> web.Response:
            return web.json_response({"reloads": certs.reloads})

        app.router.add_get("/bench/reloads", reloads)
    else:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(cert, key)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=ctx).start()
    gc.freeze()  # as `caldera webhook` does once started
    print("ready", flush=True)
    await asyncio.Event().wait()
    if watching is not None:  # never reached: the bench terminates the process
        watching.cancel()


# --- the load side ------------------------------------------------------------------------------


@dataclass(frozen=True)
class FixedRate:
    """Results of one fixed-rate run."""

    sent: int
    errors: int
    seconds: float
    p50_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float

    @property
    def achieved(self) -> float:
        return self.sent / self.seconds


def _quantile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


async def fixed_rate(
    session: aiohttp.ClientSession, url: str, body: bytes, rate: float, seconds: float
) -> FixedRate:
    """Send `rate` requests per second for `seconds`; latency from each scheduled send time."""
    loop = asyncio.get_running_loop()
    n = int(rate * seconds)
    latencies: list[float] = []
    errors = 0
    start = loop.time() + 0.05

    async def one(i: int) -> None:
        nonlocal errors
        scheduled = start + i / rate
        delay = scheduled - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        try:
            async with session.post(
                url, data=body, headers={"Content-Type": "application/json"}
            ) as resp:
                await resp.read()
                if resp.status != 200:
                    errors += 1
        except aiohttp.ClientError:
            errors += 1
        latencies.append(loop.time() - scheduled)

    await asyncio.gather(*(one(i) for i in range(n)))
    elapsed = loop.time() - start
    latencies.sort()
    ms = [x * 1000 for x in latencies]
    return FixedRate(
        sent=n,
        errors=errors,
        seconds=elapsed,
        p50_ms=statistics.median(ms),
        p99_ms=_quantile(ms, 0.99),
        p999_ms=_quantile(ms, 0.999),
        max_ms=ms[-1],
    )


async def capacity(
    session: aiohttp.ClientSession, url: str, body: bytes, seconds: float, in_flight: int = 32
) -> float:
    """Reviews per second with `in_flight` requests always outstanding."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    done = 0

    async def worker() -> None:
        nonlocal done
        while loop.time() < deadline:
            async with session.post(
                url, data=body, headers={"Content-Type": "application/json"}
            ) as resp:
                await resp.read()
            done += 1

    started = loop.time()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    return done / (loop.time() - started)


def _go() -> str | None:
    return shutil.which("go") or (
        "/usr/local/go/bin/go" if os.path.exists("/usr/local/go/bin/go") else None
    )


def build_loadgen(go: str, out_dir: Path) -> Path:
    """Compile the Go load generator (no module, standard library only)."""
    exe = out_dir / "loadgen"
    source = Path(__file__).with_name("loadgen") / "main.go"
    env = {**os.environ, "GO111MODULE": "off"}
    subprocess.run([go, "build", "-o", str(exe), str(source)], check=True, env=env)
    return exe


def _loadgen(exe: Path, url: str, body: Path, ca: Path, *flags: str) -> dict[str, float]:
    done = subprocess.run(
        [str(exe), f"-url={url}", f"-body={body}", f"-ca={ca}", *flags],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, float] = json.loads(done.stdout)
    return result


def bench_figures(port: int, path: str, ca: Path) -> dict[str, float]:
    """GET one of the bench's own JSON endpoints (``/bench/gc``, ``/bench/reloads``) of the
    server under test."""
    ctx = ssl.create_default_context(cafile=str(ca))
    with urllib.request.urlopen(f"https://127.0.0.1:{port}{path}", context=ctx) as resp:
        result: dict[str, float] = json.loads(resp.read())
    return result


def gc_pauses(port: int, ca: Path) -> dict[str, float]:
    """The server's GC pauses since the last call (and a reset)."""
    return bench_figures(port, "/bench/gc", ca)


def _measure_go(
    exe: Path, url: str, body: Path, ca: Path, rate: float, seconds: float, port: int
) -> tuple[FixedRate, float, dict[str, float]]:
    _loadgen(exe, url, body, ca, f"-rate={rate}", f"-seconds={min(1.0, seconds)}")  # warm-up
    gc_pauses(port, ca)
    r = _loadgen(exe, url, body, ca, f"-rate={rate}", f"-seconds={seconds}")
    pauses = gc_pauses(port, ca)
    cap = _loadgen(exe, url, body, ca, "-in-flight=32", f"-seconds={max(1.0, seconds / 2)}")
    fixed = FixedRate(
        sent=int(r["sent"]),
        errors=int(r["errors"]),
        seconds=r["seconds"],
        p50_ms=r["p50_ms"],
        p99_ms=r["p99_ms"],
        p999_ms=r["p999_ms"],
        max_ms=r["max_ms"],
    )
    return fixed, cap["rps"], pauses


def _start_server(
    kind: str, port: int, cert: Path, key: Path, *, reload: bool = False
) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.webhook",
            "--serve",
            kind,
            "--port",
            str(port),
            "--cert",
            str(cert),
            "--key",
            str(key),
            *(["--reload"] if reload else []),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        raise RuntimeError(f"{kind} server did not start: {line!r}")
    return proc


async def _measure(
    kind: str, path: str, body: bytes, port: int, ca: Path, rate: float, seconds: float
) -> tuple[FixedRate, float]:
    ctx = ssl.create_default_context(cafile=str(ca))
    connector = aiohttp.TCPConnector(ssl=ctx, limit=64)
    url = f"https://127.0.0.1:{port}{path}"
    async with aiohttp.ClientSession(connector=connector) as session:
        await fixed_rate(session, url, body, rate, min(1.0, seconds))  # warm-up: TLS, caches
        result = await fixed_rate(session, url, body, rate, seconds)
        reviews_per_second = await capacity(session, url, body, max(1.0, seconds / 2))
    return result, reviews_per_second


def rotation(rate: float, seconds: float) -> int:
    """Reviews at ``rate`` for ``seconds`` while the serving certificate is rewritten every
    second: no review may fail (the goal of issue 16)."""
    go = _go()
    if go is None:
        print("rotation needs go for the load generator")
        return 1
    body = json.dumps(review(three_task_job())).encode()
    with tempfile.TemporaryDirectory() as tmp:
        pki = ensure_pki(Path(tmp) / "pki")
        serving = Path(tmp) / "tls"
        cert, key = write_serving_pair(pki, serving, ["127.0.0.1"])
        exe = build_loadgen(go, Path(tmp))
        body_file = Path(tmp) / "review.json"
        body_file.write_bytes(body)
        port = free_port()
        proc = _start_server("validate", port, cert, key, reload=True)
        rotations = 0
        stop = threading.Event()

        def rotate() -> None:
            nonlocal rotations
            while not stop.wait(1.0):
                write_serving_pair(pki, serving, ["127.0.0.1"])
                rotations += 1

        rotator = threading.Thread(target=rotate, daemon=True)
        try:
            time.sleep(0.2)
            url = f"https://127.0.0.1:{port}/jobs/validate"
            rotator.start()
            r = _loadgen(
                exe,
                url,
                body_file,
                pki.ca_crt,
                f"-rate={rate}",
                f"-seconds={seconds}",
                "-fresh-every=10",
            )
            stop.set()
            rotator.join()
            reloads = int(bench_figures(port, "/bench/reloads", pki.ca_crt)["reloads"])
        finally:
            stop.set()
            proc.terminate()
            proc.wait()
    failed = int(r["errors"])
    print(
        f"rotation: {rotations} certificates written, {reloads} loaded by the server; "
        f"{int(r['sent'])} reviews at {rate:.0f}/s (every 10th on a new TLS connection): "
        f"{failed} failed, p99 {r['p99_ms']:.2f} ms (goal: 0 failed)"
    )
    return 0 if failed == 0 else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=1000.0, help="requests per second")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each run")
    parser.add_argument("--smoke", action="store_true", help="short run for CI")
    parser.add_argument(
        "--runs", type=int, default=1, help="consecutive runs (the goal holds in every one)"
    )
    parser.add_argument(
        "--servers", default="noop,validate,mutate", help="comma-separated: noop,validate,mutate"
    )
    parser.add_argument("--serve", choices=["noop", "validate", "mutate"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--cert", help=argparse.SUPPRESS)
    parser.add_argument("--key", help=argparse.SUPPRESS)
    parser.add_argument("--reload", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--rotate",
        action="store_true",
        help="rotate the serving certificate every second during a fixed-rate run of "
        "/jobs/validate (every 10th review on a new connection) and count failed reviews",
    )
    args = parser.parse_args(argv)
    if args.serve:
        asyncio.run(_serve(args.serve, args.port, args.cert, args.key, args.reload))
        return 0
    if args.rotate:
        return rotation(args.rate, 2.0 if args.smoke else args.seconds)
    rate, seconds = (100.0, 1.0) if args.smoke else (args.rate, args.seconds)
    body = json.dumps(review(three_task_job())).encode()
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, aiohttp {aiohttp.__version__}"
    )
    print(
        f"review: 3-task pytorch job, {len(body)} bytes; fixed rate {rate:.0f}/s for "
        f"{seconds:.0f} s over HTTPS keep-alive; goal p99 < {GOAL_P99_MS:.0f} ms"
    )
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        pki = ensure_pki(Path(tmp) / "pki")
        cert, key = write_serving_pair(pki, Path(tmp) / "tls", ["127.0.0.1"])
        go = _go()
        exe = build_loadgen(go, Path(tmp)) if go else None
        body_file = Path(tmp) / "review.json"
        body_file.write_bytes(body)
        print(f"load generator: {'Go (bench/loadgen)' if exe else 'aiohttp client (no go found)'}")
        print(
            f"{'run':>3} {'server':<10} {'path':<15} {'sent/s':>8} {'err':>4} {'p50 ms':>8} "
            f"{'p99 ms':>8} {'p99.9 ms':>9} {'max ms':>8} {'capacity/s':>11} {'GCs':>5} "
            f"{'GC max ms':>10}"
        )
        worst: dict[str, float] = {}
        for run in range(1, args.runs + 1):
            for kind, path in (
                ("noop", "/jobs/validate"),
                ("validate", "/jobs/validate"),
                ("mutate", "/jobs/mutate"),
            ):
                if kind not in args.servers.split(","):
                    continue
                port = free_port()
                proc = _start_server(kind, port, cert, key)
                pauses: dict[str, float] = {}
                try:
                    time.sleep(0.2)
                    if exe is not None:
                        url = f"https://127.0.0.1:{port}{path}"
                        result, cap, pauses = _measure_go(
                            exe, url, body_file, pki.ca_crt, rate, seconds, port
                        )
                    else:
                        result, cap = asyncio.run(
                            _measure(kind, path, body, port, pki.ca_crt, rate, seconds)
                        )
                finally:
                    proc.terminate()
                    proc.wait()
                gcs = f"{pauses['count']:>5.0f} {pauses['max_ms']:>10.2f}" if pauses else ""
                print(
                    f"{run:>3} {kind:<10} {path:<15} {result.achieved:>8.0f} {result.errors:>4} "
                    f"{result.p50_ms:>8.2f} {result.p99_ms:>8.2f} {result.p999_ms:>9.2f} "
                    f"{result.max_ms:>8.2f} {cap:>11.0f} {gcs}"
                )
                worst[kind] = max(worst.get(kind, 0.0), result.p99_ms)
                if kind != "noop" and (result.errors or result.p99_ms >= GOAL_P99_MS):
                    ok = False
        if args.runs > 1:
            print(
                f"worst p99 over {args.runs} runs: "
                + ", ".join(f"{kind} {ms:.2f} ms" for kind, ms in worst.items())
            )
    print("goal met" if ok else "goal NOT met (MISS)")
    return 0 if ok or args.smoke else 1


if __name__ == "__main__":
    sys.exit(main())
