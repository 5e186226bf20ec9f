"""Reading and writing the wire: the tolerant decoders every cache and client uses, and the
shared JSON encoder.

The typed msgspec decode is the fast path. An object it refuses (a ``null`` list the API server
sends for a Go field without ``omitempty``, or what another tool wrote) is decoded again with
its nulls dropped; one that still does not fit raises `UndecodableError` naming it, so a LIST
skips that item and a watch that event instead of failing on it forever. A watch ERROR event
carries a `Status` instead of the watched kind.
"""

from __future__ import annotations

from typing import Any, Final, Generic, TypeVar

import msgspec

from caldera.api.meta import ListMeta, ObjectList, Status, WatchEvent, WatchEventType

__all__ = [
    "ENCODER",
    "STATUS_DECODER",
    "ListDecoder",
    "ObjectDecoder",
    "UndecodableError",
    "WatchEventDecoder",
    "copy_json",
    "drop_nulls",
    "encode",
]

T = TypeVar("T")


def drop_nulls(value: Any) -> Any:
    """A copy of decoded JSON without null values in objects (a null list is an absent one).

    The API server sends ``null`` for empty lists whose Go field lacks ``omitempty``, and other
    tools write them too; the models treat absent and empty alike, so nulls are dropped before a
    second, tolerant decode.
    """
    if isinstance(value, dict):
        return {k: drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_nulls(v) for v in value if v is not None]
    return value


def copy_json(value: Any) -> Any:
    """A deep copy of decoded JSON: objects and arrays copied, the immutable leaves shared
    (several times faster than ``copy.deepcopy``, which a pod per replica paid for)."""
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    return value


class UndecodableError(msgspec.ValidationError):
    """An object the model cannot represent even after dropping nulls; carries what is known."""

    def __init__(
        self, message: str, *, name: str = "", namespace: str = "", resource_version: str = ""
    ) -> None:
        super().__init__(message)
        self.name, self.namespace, self.resource_version = name, namespace, resource_version


def _identity_of(raw: Any) -> dict[str, str]:
    meta = raw.get("metadata") if isinstance(raw, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    return {
        "name": str(meta.get("name") or ""),
        "namespace": str(meta.get("namespace") or ""),
        "resource_version": str(meta.get("resourceVersion") or ""),
    }


class ObjectDecoder(Generic[T]):
    """Decodes one object: the fast typed decode, else a tolerant one (nulls dropped).

    The fast path costs one typed decode; the fallback runs only for objects that fail it.
    Raises UndecodableError (naming the object) when even the tolerant decode fails.
    """

    __slots__ = ("_fast", "_type")

    def __init__(self, type_: type[T]) -> None:
        self._type = type_
        self._fast: msgspec.json.Decoder[T] = msgspec.json.Decoder(type_)

    def decode(self, data: bytes | str) -> T:
        try:
            return self._fast.decode(data)
        except msgspec.ValidationError as error:
            return self.convert(msgspec.json.decode(data), error)

    def convert(self, raw: Any, error: Exception | None = None) -> T:
        """Build the model from already-decoded JSON, tolerating nulls."""
        try:
            return msgspec.convert(drop_nulls(raw), self._type)
        except msgspec.ValidationError as second:
            ident = _identity_of(raw)
            where = "/".join(p for p in (ident["namespace"], ident["name"]) if p) or "object"
            raise UndecodableError(f"cannot decode {where}: {error or second}", **ident) from second


class ListDecoder(Generic[T]):
    """Decodes a LIST page; an item that cannot be decoded is skipped and reported, so one bad
    object never hides all the others."""

    __slots__ = ("_fast", "_item", "on_skip")

    def __init__(self, type_: type[T]) -> None:
        self._fast: msgspec.json.Decoder[ObjectList[T]] = msgspec.json.Decoder(ObjectList[type_])  # type: ignore[valid-type]
        self._item = ObjectDecoder(type_)
        self.on_skip: list[UndecodableError] = []  # the last page's skipped items

    def decode(self, data: bytes | str) -> ObjectList[T]:
        self.on_skip = []
        try:
            return self._fast.decode(data)
        except msgspec.ValidationError:
            raw = msgspec.json.decode(data)
        items: list[T] = []
        for item in raw.get("items") or []:
            try:
                items.append(self._item.convert(item))
            except UndecodableError as exc:
                self.on_skip.append(exc)
        meta = msgspec.convert(drop_nulls(raw.get("metadata") or {}), ListMeta)
        return ObjectList[T](metadata=meta, items=tuple(items))


class WatchEventDecoder(Generic[T]):
    """Decodes watch lines of one kind, returning ERROR events with a `Status` object.

    The common case costs one typed decode. An ERROR event carries a Status instead of the watched
    kind: it either fails the typed decode (e.g. its string `status` against a struct) or decodes
    into a meaningless object, so both cases are decoded again as Status. An event whose object
    the model cannot take even without nulls raises UndecodableError naming the object and its
    resourceVersion, so a watcher can skip it instead of failing on it forever.
    """

    __slots__ = ("_item", "_status", "_typed")

    def __init__(self, type_: type[T]) -> None:
        self._typed: msgspec.json.Decoder[WatchEvent[T]] = msgspec.json.Decoder(WatchEvent[type_])  # type: ignore[valid-type]
        self._status: msgspec.json.Decoder[WatchEvent[Status]] = msgspec.json.Decoder(
            WatchEvent[Status]
        )
        self._item = ObjectDecoder(type_)

    def decode(self, data: bytes | str) -> WatchEvent[T] | WatchEvent[Status]:
        """Decode one watch line; raise msgspec.DecodeError on a line that is not JSON."""
        try:
            event = self._typed.decode(data)
        except msgspec.ValidationError as typed_error:
            try:
                status_event = self._status.decode(data)
            except msgspec.ValidationError:
                status_event = None
            if status_event is not None and status_event.type == WatchEventType.ERROR:
                return status_event
            raw = msgspec.json.decode(data)
            if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
                raise typed_error from None
            obj = self._item.convert(raw.get("object"), typed_error)
            return WatchEvent[T](type=raw["type"], object=obj)
        if event.type == WatchEventType.ERROR:
            return self._status.decode(data)
        return event


ENCODER: Final = msgspec.json.Encoder()
STATUS_DECODER: Final = msgspec.json.Decoder(Status)


def encode(obj: Any) -> bytes:
    """Encode a model (or plain data) as JSON with the shared encoder."""
    return ENCODER.encode(obj)
