"""The fencing run's pure parts (e2e/chaos/fencing.py): the writes read from the audit log, the
moment the standby took the Lease, the old leader's writes after it, and over-committed nodes.
The run itself is e2e/test_fencing.py."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import msgspec

from caldera.api.core import Pod
from e2e.chaos.fencing import audit_writes, overcommitted, takeover_time, writes_after

OLD = "system:serviceaccount:ns:caldera-scheduler"
NEW = "system:serviceaccount:ns:caldera-scheduler-b"


def event(user: str, verb: str, resource: str, at: str, code: int = 200, **ref: str) -> str:
    return json.dumps(
        {
            "kind": "Event",
            "stage": "ResponseComplete",
            "auditID": f"{user}{verb}{resource}{at}",
            "verb": verb,
            "user": {"username": user},
            "objectRef": {"resource": resource, **ref},
            "responseStatus": {"code": code},
            "requestReceivedTimestamp": f"2026-01-01T10:00:{at}Z",
        }
    )


LOG = [
    event(OLD, "update", "leases", "01.000000"),
    event(OLD, "create", "pods", "02.000000", subresource="binding", name="p0"),
    event(NEW, "update", "leases", "05.000000", code=409),  # a lost round: not the takeover
    event(NEW, "update", "leases", "07.500000"),
    event(OLD, "get", "pods", "08.000000"),  # a read
    "not json",
    event(OLD, "update", "leases", "08.100000", code=409),  # its Lease calls do not count
    event(OLD, "create", "pods", "08.200000", code=409, subresource="binding", name="p1"),
    event(OLD, "patch", "queues", "09.000000", subresource="status", name="default"),
]


def test_the_old_leaders_writes_after_the_standby_took_the_lease() -> None:
    writes = list(audit_writes(LOG))
    assert all(w.verb != "get" for w in writes)
    since = takeover_time(writes, NEW)
    assert since == dt.datetime(2026, 1, 1, 10, 0, 7, 500000, tzinfo=dt.UTC)
    after = writes_after(writes, OLD, since)
    assert [(w.verb, w.resource, w.name, w.code) for w in after] == [
        ("create", "pods/binding", "p1", 409),
        ("patch", "queues/status", "default", 200),
    ]


def test_no_takeover_without_a_successful_lease_write() -> None:
    assert takeover_time(audit_writes(LOG[:3]), NEW) is None


def pod(node: str, cpu: str, phase: str = "Running") -> Pod:
    body: dict[str, Any] = {
        "metadata": {"name": f"p-{node}-{cpu}"},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        },
        "status": {"phase": phase},
    }
    return msgspec.convert(body, Pod)


def test_a_node_is_overcommitted_when_its_live_pods_request_more_than_it_holds() -> None:
    pods = [pod("a", "3"), pod("a", "2"), pod("b", "3"), pod("b", "2", "Succeeded"), pod("c", "9")]
    assert overcommitted(pods, {"a": 4000, "b": 4000}) == ["a"]
