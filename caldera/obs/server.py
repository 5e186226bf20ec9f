"""The HTTP endpoints every process serves: ``/metrics``, ``/healthz``, ``/readyz``.

``/healthz`` answers 200 while the event loop answers at all (a wedged loop times out the
probe). ``/readyz`` is 503 until every readiness check passes (informers synced, for example) and
lists the failing ones, so ``kubectl describe`` of a failing probe says what is missing.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from caldera.obs.volcano import VolcanoNames

ReadinessCheck = Callable[[], bool]


class HealthServer:
    """Serves metrics and probes on one port; readiness checks are registered by name. With
    ``volcano_names``, ``/metrics`` also serves Volcano's names (``caldera.obs.volcano``)."""

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        host: str = "0.0.0.0",  # noqa: S104 - in a pod the probes come from the kubelet's address
        port: int = 8080,
        volcano_names: bool = False,
    ) -> None:
        self.registry: Collector = VolcanoNames(registry) if volcano_names else registry
        self.host, self.port = host, port
        self._checks: dict[str, ReadinessCheck] = {}
        self._runner: web.AppRunner | None = None

    def add_readiness_check(self, name: str, check: ReadinessCheck) -> None:
        self._checks[name] = check

    def failing_checks(self) -> list[str]:
        failing = []
        for name, check in self._checks.items():
            try:
                ok = check()
            except Exception:  # a broken check means "not ready", never a 500
                ok = False
            if not ok:
                failing.append(name)
        return failing

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/livez", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        return app

    async def start(self) -> int:
        """Start listening; returns the bound port (useful with port 0 in tests)."""
        self._runner = web.AppRunner(self.app(), handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        server = site._server  # the only way aiohttp exposes the bound socket
        if server is not None and server.sockets:  # type: ignore[attr-defined]
            self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _metrics(self, request: web.Request) -> web.Response:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        return web.Response(body=encoder(self.registry), headers={"Content-Type": content_type})

    async def _healthz(self, _request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _readyz(self, _request: web.Request) -> web.Response:
        failing = self.failing_checks()
        if failing:
            return web.Response(status=503, text="not ready: " + ", ".join(failing) + "\n")
        return web.Response(text="ok")
