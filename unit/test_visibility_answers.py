"""What the visibility API answers (scheduler.visibility.answers) and whom it believes
(scheduler.visibility.requestheader): hidden entries, paging, bad queries named, the
front-proxy settings and headers; and the CLI's table of them (cli.pending)."""

from __future__ import annotations

import datetime as dt

import msgspec
import pytest

from caldera.api.visibility import PENDING_JOB_LIST_DECODER, PendingJobList
from caldera.api.why import WaitRecord
from cli.pending import pending_table
from scheduler.visibility.answers import BadQueryError, answer, namespaces_of, page_bounds
from scheduler.visibility.order import PendingEntry, publish
from scheduler.visibility.requestheader import (
    RequestHeaderConfig,
    RequestHeaderError,
    common_name,
    identity,
)

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
RECORD = WaitRecord(stage="enqueue", summary="queue q has 4 cpu of 4 cpu allocated", time="t")


def _entries() -> tuple[PendingEntry, ...]:
    return tuple(
        PendingEntry(
            key=f"{ns}/{name}",
            namespace=ns,
            podgroup=name,
            job=name.removesuffix("-pg"),
            queue="q",
            position_in_queue=i,
            position_in_cluster=i,
            priority=10 - i,
            phase="Pending",
            record=RECORD,
            created=T0,
        )
        for i, (ns, name) in enumerate(
            [("team-a", "a1-pg"), ("team-b", "b1-pg"), ("team-a", "a2-pg")], 1
        )
    )


def test_another_namespaces_entry_keeps_its_place_but_not_its_names() -> None:
    """Hidden: no namespace, job, PodGroup or record; position, priority and phase stay."""
    positions = publish(_entries(), T0, None)
    page = answer(
        positions, positions.entries, offset=0, limit=10, visible=lambda ns: ns == "team-a"
    )
    assert [(i.job, i.hidden) for i in page.items] == [("a1", False), ("", True), ("a2", False)]
    hidden = page.items[1]
    assert hidden.metadata.namespace == hidden.metadata.name == hidden.pod_group == ""
    assert hidden.waiting_for is None
    assert (hidden.position_in_queue, hidden.priority, hidden.queue) == (2, 8, "q")
    shown = page.items[0]
    assert (shown.metadata.namespace, shown.pod_group, shown.waiting_for) == (
        "team-a",
        "a1-pg",
        RECORD,
    )
    assert shown.waiting_since == "2026-01-01T00:00:00Z"


def test_offset_and_limit_page_the_list_and_total_counts_all() -> None:
    """A page of one from offset 1; the total is the whole list's."""
    positions = publish(_entries(), T0, None)
    page = answer(positions, positions.entries, offset=1, limit=1)
    assert [i.pod_group for i in page.items] == ["b1-pg"]
    assert page.total == 3
    assert namespaces_of(positions.entries, 0, 3) == ["team-a", "team-b"]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"limit": "0"}, "limit: must be between 1 and 5000, not 0"),
        ({"limit": "9999"}, "limit: must be between 1 and 5000, not 9999"),
        ({"offset": "-1"}, "offset: must be between 0 and 1000000000, not -1"),
        ({"limit": "ten"}, "limit: must be a whole number, not 'ten'"),
    ],
)
def test_bad_paging_is_refused_naming_the_parameter(query: dict[str, str], message: str) -> None:
    """Out of bounds or not a number: the message names the parameter."""
    with pytest.raises(BadQueryError, match=message):
        page_bounds(query)


def test_paging_defaults_as_kueue_does() -> None:
    """No parameters: from the first entry, at most 1000."""
    assert page_bounds({}) == (0, 1000)


def test_the_list_round_trips_through_its_decoder() -> None:
    """What the server encodes, the CLI and the dashboard decode."""
    positions = publish(_entries(), T0, None)
    page = answer(positions, positions.entries, offset=0, limit=10)
    decoded = PENDING_JOB_LIST_DECODER.decode(msgspec.json.encode(page))
    assert isinstance(decoded, PendingJobList)
    assert decoded == page
    assert decoded.api_version == "visibility.caldera.dev/v1alpha1"


CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def test_front_proxy_settings_from_the_api_servers_configmap() -> None:
    """The ConfigMap's JSON lists; defaults where a key is absent."""
    config = RequestHeaderConfig.from_configmap(
        {
            "requestheader-client-ca-file": CA,
            "requestheader-allowed-names": '["front-proxy-client"]',
            "requestheader-username-headers": '["X-Remote-User"]',
            "requestheader-group-headers": '["X-Remote-Group"]',
        }
    )
    assert config.allowed_names == ("front-proxy-client",)
    assert config.extra_prefixes == ("X-Remote-Extra-",)
    assert config.proxy_allowed("front-proxy-client")
    assert not config.proxy_allowed("kube-apiserver-kubelet-client")
    assert not config.proxy_allowed(None)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "no requestheader-client-ca-file"),
        (
            {"requestheader-client-ca-file": CA, "requestheader-allowed-names": "[1]"},
            "requestheader-allowed-names is not a list of strings",
        ),
        (
            {"requestheader-client-ca-file": CA, "requestheader-group-headers": "{"},
            "requestheader-group-headers is not JSON",
        ),
    ],
)
def test_a_missing_or_malformed_setting_is_named(data: dict[str, str], message: str) -> None:
    """Refused at start with the key that is wrong."""
    with pytest.raises(RequestHeaderError, match=message):
        RequestHeaderConfig.from_configmap(data)


def test_any_common_name_when_no_names_are_allowed() -> None:
    """Kubernetes' rule: an empty allowed-names list accepts any certificate of the CA."""
    assert RequestHeaderConfig(client_ca=CA).proxy_allowed("anyone")


def test_identity_from_the_proxys_headers() -> None:
    """User, every group header, extras unescaped and lower-cased; no user: nobody."""
    config = RequestHeaderConfig(client_ca=CA)
    headers = [
        ("X-Remote-User", "system:serviceaccount:team:reader"),
        ("X-Remote-Group", "system:serviceaccounts"),
        ("x-remote-group", "system:authenticated"),
        ("X-Remote-Extra-Authentication.kubernetes.io%2fpod-name", "p"),
        ("X-Other", "ignored"),
    ]
    who = identity(config, headers)
    assert who is not None
    assert who.user == "system:serviceaccount:team:reader"
    assert who.groups == ("system:serviceaccounts", "system:authenticated")
    assert who.extra == {"authentication.kubernetes.io/pod-name": ("p",)}
    assert identity(config, [("X-Remote-Group", "system:masters")]) is None


def test_common_name_of_a_peer_certificate() -> None:
    """The subject's CN in getpeercert()'s nested form; none without a certificate."""
    peer = {"subject": ((("organizationName", "x"),), (("commonName", "front-proxy-client"),))}
    assert common_name(peer) == "front-proxy-client"
    assert common_name(None) is None
    assert common_name({"subject": ()}) is None


def test_the_cli_table_shows_positions_and_hides_names() -> None:
    """One row per job in queue order; a hidden job keeps its place without names."""
    positions = publish(_entries(), T0, None)
    page = answer(
        positions, positions.entries, offset=0, limit=10, visible=lambda ns: ns == "team-a"
    )
    table = pending_table(page.items, T0 + dt.timedelta(minutes=5))
    lines = table.splitlines()
    assert lines[0].split() == [
        "POSITION",
        "CLUSTER",
        "JOB",
        "NAMESPACE",
        "PRIORITY",
        "WAITING",
        "FOR",
        "SINCE",
    ]
    assert lines[1].split()[:5] == ["1", "1", "a1", "team-a", "9"]
    assert "enqueue: queue q has 4 cpu" in lines[1]
    assert lines[1].split()[-1] == "5m"
    assert lines[2].split()[:5] == ["2", "2", "(hidden)", "-", "8"]
