"""The extender plugin's HTTP transport (``scheduler.plugins.extender``): POST JSON to
``<urlPrefix>/<verb>``, bounded in time and size.

Each call takes at most the configuration's `extender.httpTimeout` from connect to the last byte
of the answer, as Volcano's `http.Client{Timeout}`: a watchdog shuts the connection down at the
deadline, so an extender that trickles its answer a byte at a time is cut off too. An answer is
read up to 10 MiB (Volcano's `maxBodySize`). On
top of Volcano, one transport (one per plugin instance, so per session) spends at most
`extender.sessionBudget` (Caldera's argument, default 5s) in calls: once spent, every later call
fails at once, and with it the plugin's calls for the session. A session therefore waits on an
extender for at most that budget plus one timeout, whatever the number of pods and nodes.
The calls block: the session runs in a worker thread (``scheduler.process``), never on the
event loop.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
import urllib.parse
from typing import Final

from scheduler.plugins.extender import ExtenderConfig, ExtenderError

__all__ = ["MAX_BODY", "HttpTransport"]

MAX_BODY: Final = 10 << 20


class HttpTransport:
    """POSTs to the extender with a per-call timeout and a per-session budget."""

    def __init__(self, config: ExtenderConfig) -> None:
        self.config = config
        url = urllib.parse.urlsplit(config.url_prefix)
        self._https = url.scheme == "https"
        self._host = url.netloc
        self._path = url.path.rstrip("/")
        self.spent = 0.0

    def __call__(self, verb: str, body: bytes) -> bytes:
        if self.spent >= self.config.session_budget:
            raise ExtenderError(
                f"the session's budget of {self.config.session_budget:g}s for extender calls "
                "is spent"
            )
        started = time.monotonic()
        try:
            return self._post(f"{self._path}/{verb}", body)
        finally:
            self.spent += time.monotonic() - started

    def _post(self, path: str, body: bytes) -> bytes:
        timeout = self.config.http_timeout
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        conn = cls(self._host, timeout=timeout)
        cut = threading.Event()

        def cut_off() -> None:
            cut.set()
            sock = conn.sock
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)  # unblocks a recv in the calling thread

        watchdog = threading.Timer(timeout, cut_off)
        watchdog.daemon = True
        watchdog.start()
        try:
            conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            if response.status != http.client.OK:
                raise ExtenderError(
                    f"failed {path.rsplit('/', 1)[-1]} with extender at URL "
                    f"{self.config.url_prefix.rstrip('/')}{path[len(self._path) :]}, "
                    f"code {response.status}"
                )
            data = response.read(MAX_BODY + 1)
            if cut.is_set():
                raise ExtenderError(f"no whole answer within {timeout:g}s")
            if len(data) > MAX_BODY:
                raise ExtenderError(f"the answer is larger than {MAX_BODY} bytes")
            return data
        except (OSError, http.client.HTTPException) as exc:
            if cut.is_set():
                raise ExtenderError(f"no whole answer within {timeout:g}s") from None
            raise ExtenderError(f"{type(exc).__name__}: {exc}") from None
        finally:
            watchdog.cancel()
            conn.close()
