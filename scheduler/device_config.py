"""The deviceshare plugin's device ConfigMap, read by the scheduler process (Volcano's
config.InitDevicesConfig): the MIG geometries its MIG nodes are shared by.

The configuration's deviceshare entry names the ConfigMap (``deviceshare.KnownGeometriesCMName``
and ``KnownGeometriesCMNamespace``); only a configuration with ``deviceshare.VGPUEnable`` has
one read. It is read with a GET when first needed and again at most every ``REFRESH_SECONDS``
(Volcano reads it once at start; a changed geometry then needs no restart). A ConfigMap that
is missing, forbidden or does not read leaves no geometry known, with the reason kept for the
wait records of pods refused by MIG cards; a read that fails on the way (connection, server
error) keeps what was read before. Nothing here raises into the session loop.
"""

from __future__ import annotations

from typing import Final

import structlog

from caldera.api.kinds import CONFIGMAP
from caldera.api.mig import (
    DEFAULT_CM_NAME,
    DEFAULT_CM_NAMESPACE,
    NO_DEVICE_CONFIG,
    ConfigError,
    DeviceConfig,
    parse_device_config,
)
from caldera.kube.client import KubeClient
from caldera.kube.errors import ApiConnectionError, ApiError, NotFound
from scheduler.conf import SchedulerConf

log = structlog.get_logger("scheduler.device_config")

REFRESH_SECONDS: Final = 30.0


def config_source(conf: SchedulerConf) -> tuple[str, str] | None:
    """(namespace, name) of the device ConfigMap a configuration's deviceshare plugin reads;
    None when no deviceshare entry turns vGPU on."""
    for tier in conf.tiers:
        for option in tier:
            arguments = option.arguments
            if option.name != "deviceshare":
                continue
            if str(arguments.get("deviceshare.VGPUEnable", "false")).lower() != "true":
                continue
            name = str(arguments.get("deviceshare.KnownGeometriesCMName") or DEFAULT_CM_NAME)
            namespace = str(
                arguments.get("deviceshare.KnownGeometriesCMNamespace") or DEFAULT_CM_NAMESPACE
            )
            return namespace, name
    return None


class DeviceConfigReader:
    """Keeps the device configuration read from its ConfigMap (see the module docstring)."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client
        self._source: tuple[str, str] | None = None
        self._read_at: float | None = None
        self.config: DeviceConfig = NO_DEVICE_CONFIG

    async def refresh(self, source: tuple[str, str] | None, now: float) -> bool:
        """Read the ConfigMap again when due (``now``: a monotonic clock); whether what the
        sessions see changed."""
        if source is None:
            changed = self.config is not NO_DEVICE_CONFIG
            self._source, self._read_at, self.config = None, None, NO_DEVICE_CONFIG
            return changed
        due = self._read_at is None or now - self._read_at >= REFRESH_SECONDS
        if source == self._source and not due:
            return False
        self._source, self._read_at = source, now
        namespace, name = source
        where = f"ConfigMap {namespace}/{name}"
        try:
            found = await self._client.get(CONFIGMAP, name, namespace=namespace)
            config = parse_device_config(found.data)
        except NotFound:
            config = DeviceConfig(problem=f"{where} not found")
        except ConfigError as exc:
            config = DeviceConfig(problem=f"{where}: {exc}")
        except (ApiConnectionError, TimeoutError) as exc:
            log.warning(
                "device configmap not read; keeping the last", configmap=where, error=str(exc)
            )
            return False
        except ApiError as exc:
            config = DeviceConfig(problem=f"{where} not read ({exc.status} {exc.reason})")
        if config == self.config:
            return False
        if config.problem:
            log.warning("device configmap gives no MIG geometry", problem=config.problem)
        else:
            log.info("device configmap read", configmap=where, models=len(config.known))
        self.config = config
        return True
