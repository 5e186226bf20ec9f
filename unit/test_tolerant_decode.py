"""Decoding never lets one odd object break a cache: nulls are absent values, and an object the
model cannot take is reported by name instead of failing a whole LIST or watch."""

from __future__ import annotations

import msgspec
import pytest

from caldera.api.codec import UndecodableError, drop_nulls
from caldera.api.kinds import POD, PODGROUP


def test_drop_nulls_removes_null_members_at_every_depth() -> None:
    """Null members of objects and arrays are dropped; other falsy values are kept."""
    raw = {"a": None, "b": [1, None, {"c": None, "d": 0}], "e": "", "f": False}
    assert drop_nulls(raw) == {"b": [1, {"d": 0}], "e": "", "f": False}


def test_null_lists_decode_as_empty() -> None:
    """A null list (API servers send them for fields without omitempty) decodes as empty."""
    pg = PODGROUP.decoder.decode(
        b'{"metadata":{"name":"x","finalizers":null},"status":{"conditions":null}}'
    )
    assert pg.metadata.finalizers == ()
    assert pg.status.conditions == ()
    pod = POD.decoder.decode(b'{"metadata":{"name":"p"},"spec":{"tolerations":null}}')
    assert pod.spec.tolerations == ()


def test_undecodable_object_names_itself() -> None:
    """An object of the wrong shape raises UndecodableError with its name and version."""
    with pytest.raises(UndecodableError) as err:
        POD.decoder.decode(
            b'{"metadata":{"name":"p","namespace":"n","resourceVersion":"7"},"spec":3}'
        )
    assert err.value.name == "p"
    assert err.value.namespace == "n"
    assert err.value.resource_version == "7"
    assert "n/p" in str(err.value)
    assert isinstance(err.value, msgspec.ValidationError)


def test_list_skips_only_the_bad_item() -> None:
    """One undecodable item in a LIST page is skipped and reported; the others are kept."""
    page = POD.list_decoder.decode(
        b'{"metadata":{"resourceVersion":"5"},"items":['
        b'{"metadata":{"name":"a"}},{"metadata":{"name":"b"},"spec":{"containers":5}},'
        b'{"metadata":{"name":"c","labels":null}}]}'
    )
    assert [p.metadata.name for p in page.items] == ["a", "c"]
    assert page.metadata.resource_version == "5"
    assert [e.name for e in POD.list_decoder.on_skip] == ["b"]


def test_watch_event_with_nulls_decodes_and_bad_one_names_its_version() -> None:
    """A watch event with nulls decodes; one the model cannot take raises with its version."""
    event = POD.watch_decoder.decode(
        b'{"type":"ADDED","object":{"metadata":{"name":"w","labels":null}}}'
    )
    assert event.type == "ADDED"
    assert event.object is not None
    with pytest.raises(UndecodableError) as err:
        POD.watch_decoder.decode(
            b'{"type":"MODIFIED","object":{"metadata":{"name":"w","resourceVersion":"9"},"spec":7}}'
        )
    assert err.value.resource_version == "9"


def test_watch_error_event_still_decodes_as_status() -> None:
    """An ERROR event still comes back as a Status, not as an undecodable pod."""
    event = POD.watch_decoder.decode(
        b'{"type":"ERROR","object":{"kind":"Status","status":"Failure","code":410,"reason":"Expired"}}'
    )
    assert event.type == "ERROR"
    assert getattr(event.object, "code", None) == 410
