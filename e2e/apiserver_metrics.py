"""The API server's own request counters, to check (tests) and show (benchmarks) which writes a
piece of Caldera made."""

from __future__ import annotations

import re
from collections import Counter

from caldera.kube.client import KubeClient

_REQUESTS = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$", re.M)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


async def request_counts(kube: KubeClient, *, by_code: bool = False) -> Counter[str]:
    """The API server's request counters (``apiserver_request_total``) by "VERB resource[/sub]",
    with " <code>" appended when ``by_code``. The counters are the whole API server's."""
    text = (await kube.request("GET", "/metrics")).decode()
    counts: Counter[str] = Counter()
    for match in _REQUESTS.finditer(text):
        labels = dict(_LABEL.findall(match["labels"]))
        sub = f"/{labels['subresource']}" if labels.get("subresource") else ""
        key = f"{labels.get('verb', '?')} {labels.get('resource', '?')}{sub}"
        if by_code:
            key = f"{key} {labels.get('code', '?')}"
        counts[key] += int(float(match["value"]))
    return counts
