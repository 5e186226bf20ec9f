"""Shared pieces of the Kubernetes wire format: object metadata, lists, watch events, Status.

Every model in `caldera.api` is a `msgspec.Struct` with the same configuration (`Model` below):

- frozen (repeated on every subclass: mypy does not inherit it): objects from the informer cache
  are shared values; change them with `msgspec.structs.replace` or build a patch, never in place.
  Sequences are tuples for the same reason. Dicts (labels, raw pod templates) cannot be frozen:
  treat them as read-only and copy them before changing them.
- `rename="camel"`: Python snake_case, JSON camelCase; the few Kubernetes names that are not plain
  camelCase (`hostIP`, `transitionID`, ...) are spelled out with `msgspec.field(name=...)`.
- every field has a default, so partial objects decode, and unknown fields are skipped.
- `omit_defaults=True`: a field equal to its default is not encoded. Defaults follow what the API
  server's stored object means when the key is absent: Go's zero value for `omitempty` fields (Go
  omits them the same way), `None` for pointers, and the CRD default where the CRD declares one (the
  API server puts it back on every write, so omitting it loses nothing). `apiVersion` and `kind`
  are always encoded: the API server rejects bodies without them.

`metadata.managedFields` is not modelled on purpose: it is large, never read, and an update whose
body has no managedFields keeps the live object's (server-side field manager behaviour).

The `crd(...)` annotation carries the OpenAPI markers (minimum, pattern, enum, required, CRD
default) that `caldera.api.crdgen` turns into the CRD schemas. They are not checked on decode, so a
value the API server would reject still decodes; validation with Volcano's messages lives in the
webhook.

Timestamps stay RFC 3339 strings on the wire models; `parse_time`/`format_time` convert them.
Durations (`metav1.Duration`, e.g. "1m30s") stay strings too; `caldera.api.duration` reads and
writes them.
"""

from __future__ import annotations

import datetime as dt
import enum
import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Annotated, Any, Final, Generic, Protocol, TypeVar

import msgspec

__all__ = [
    "DNS1123_LABEL",
    "DNS1123_SUBDOMAIN",
    "Condition",
    "Int32",
    "Int64",
    "LabelSelector",
    "LabelSelectorRequirement",
    "ListMeta",
    "MicroTime",
    "Model",
    "ObjectList",
    "ObjectMeta",
    "ObjectReference",
    "OwnerReference",
    "Quantity",
    "ResourceList",
    "Status",
    "StatusCause",
    "StatusDetails",
    "TemplateMeta",
    "Time",
    "WatchEvent",
    "WatchEventType",
    "condition_is_true",
    "controller_of",
    "crd",
    "find_condition",
    "format_micro_time",
    "format_time",
    "object_key",
    "parse_time",
    "type_meta",
]

T = TypeVar("T")

# Name patterns as the Volcano CRDs spell them (k8s.io/apimachinery validation).
DNS1123_LABEL: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS1123_SUBDOMAIN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


class Model(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    rename="camel",
    omit_defaults=True,
    # Decoded API objects never form reference cycles (frozen, built from JSON), so the cyclic
    # garbage collector need not track them: with a 50,000-pod cache, full collections walking
    # every cached struct cost more than decoding (bench/informer.py).
    gc=False,
):
    """Base of every wire model: see the module docstring for the configuration."""


def crd(
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    min_length: int | None = None,
    max_length: int | None = None,
    pattern: str | None = None,
    enum: Iterable[str] | None = None,
    min_items: int | None = None,
    fmt: str | None = None,
    required: bool = False,
    crd_default: bool = False,
) -> msgspec.Meta:
    """Return the CRD schema markers of a field, for use in `Annotated[...]`.

    `required` lists the field in its object's `required`; `crd_default` makes the field's model
    default the CRD `default`. The other arguments are the OpenAPI keywords of the same name.
    """
    schema: dict[str, Any] = {}
    for key, value in (
        ("minimum", minimum),
        ("maximum", maximum),
        ("minLength", min_length),
        ("maxLength", max_length),
        ("pattern", pattern),
        ("minItems", min_items),
        ("format", fmt),
    ):
        if value is not None:
            schema[key] = value
    if enum is not None:
        schema["enum"] = [str(v) for v in enum]
    extra: dict[str, Any] = {}
    if required:
        extra["required"] = True
    if crd_default:
        extra["crd_default"] = True
    return msgspec.Meta(extra_json_schema=schema or None, extra=extra or None)


Int32 = Annotated[int, crd(fmt="int32")]
Int64 = Annotated[int, crd(fmt="int64")]
# metav1.Time: RFC 3339 with second precision, e.g. "2024-05-01T10:00:00Z".
Time = Annotated[str, crd(fmt="date-time")]
# metav1.MicroTime: RFC 3339 with microseconds (Lease renewTime, Event eventTime).
MicroTime = Annotated[str, crd(fmt="date-time")]
# resource.Quantity: "500m", "1Gi", 2, 0.5 (YAML numbers); parsed by caldera.api.quantity.
Quantity = Annotated[str | int | float, msgspec.Meta(extra={"quantity": True})]
ResourceList = dict[str, Quantity]


def type_meta(value: str) -> Any:
    """Return a field for `apiVersion` or `kind` that decodes to `value` when absent.

    A `default_factory` (unlike a plain default) is always encoded under `omit_defaults`, so the
    type meta is always on the wire, and list items, which the API server sends without it, still
    get it on decode.
    """
    factory: Callable[[], str] = lambda: value  # noqa: E731 - one closure per field
    return msgspec.field(default_factory=factory)


class OwnerReference(Model, frozen=True):
    """metav1.OwnerReference; also Command.target."""

    api_version: Annotated[str, crd(required=True)] = ""
    kind: Annotated[str, crd(required=True)] = ""
    name: Annotated[str, crd(required=True)] = ""
    uid: Annotated[str, crd(required=True)] = ""
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(Model, frozen=True):
    """metav1.ObjectMeta without managedFields and selfLink (see the module docstring)."""

    name: str = ""
    generate_name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    creation_timestamp: Time | None = None
    deletion_timestamp: Time | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    owner_references: tuple[OwnerReference, ...] = ()
    finalizers: tuple[str, ...] = ()


class TemplateMeta(Model, frozen=True):
    """The metadata a template may carry (controller-gen's embedded ObjectMeta subset)."""

    name: str = ""
    namespace: str = ""
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    finalizers: tuple[str, ...] = ()


class ListMeta(Model, frozen=True):
    """metav1.ListMeta."""

    resource_version: str = ""
    continue_: str = msgspec.field(default="", name="continue")
    remaining_item_count: int | None = None


class ObjectReference(Model, frozen=True):
    """core/v1 ObjectReference (Event.involvedObject, CronJob.status.active)."""

    api_version: str = ""
    kind: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""
    resource_version: str = ""
    field_path: str = ""


class LabelSelectorRequirement(Model, frozen=True):
    """metav1.LabelSelectorRequirement."""

    key: Annotated[str, crd(required=True)] = ""
    operator: Annotated[str, crd(required=True)] = ""
    values: tuple[str, ...] = ()


class LabelSelector(Model, frozen=True):
    """metav1.LabelSelector."""

    match_labels: dict[str, str] = {}
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()


class Condition(Model, frozen=True):
    """A condition of a core object (Node, PVC) or a metav1.Condition.

    The union of their fields: Node conditions carry lastHeartbeatTime, metav1.Condition
    observedGeneration. Pods have their own, slimmer `caldera.api.core.PodCondition`.
    """

    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""
    last_transition_time: Time | None = None
    last_probe_time: Time | None = None
    last_heartbeat_time: Time | None = None
    observed_generation: int | None = None


class StatusCause(Model, frozen=True):
    """metav1.StatusCause."""

    reason: str = ""
    message: str = ""
    field: str = ""


class StatusDetails(Model, frozen=True):
    """metav1.StatusDetails."""

    name: str = ""
    group: str = ""
    kind: str = ""
    uid: str = ""
    causes: tuple[StatusCause, ...] = ()
    retry_after_seconds: int | None = None


class Status(Model, frozen=True):
    """metav1.Status: the body of an API error and of a watch ERROR event."""

    api_version: str = type_meta("v1")
    kind: str = type_meta("Status")
    metadata: ListMeta = ListMeta()
    status: str = ""
    message: str = ""
    reason: str = ""
    details: StatusDetails | None = None
    code: int = 0


class ObjectList(Model, Generic[T], frozen=True):
    """A LIST response (`PodList`, `JobList`, ...)."""

    api_version: str = ""
    kind: str = ""
    metadata: ListMeta = ListMeta()
    items: tuple[T, ...] = ()


class WatchEventType(enum.StrEnum):
    """Values of WatchEvent.type."""

    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    BOOKMARK = "BOOKMARK"
    ERROR = "ERROR"


class WatchEvent(Model, Generic[T], frozen=True):
    """One line of a watch stream. For ERROR events `object` is a Status (see
    `caldera.api.codec.WatchEventDecoder`)."""

    type: str = ""
    object: T | None = None


class _HasMeta(Protocol):
    @property
    def metadata(self) -> ObjectMeta: ...


def object_key(obj: _HasMeta) -> str:
    """The cache key of an object: "namespace/name", or "name" for cluster-scoped objects."""
    meta = obj.metadata
    return f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name


def controller_of(meta: ObjectMeta) -> OwnerReference | None:
    """The owner reference with `controller: true`, if any."""
    for ref in meta.owner_references:
        if ref.controller:
            return ref
    return None


class _HasType(Protocol):
    @property
    def type(self) -> str: ...


class _HasTypeAndStatus(_HasType, Protocol):
    @property
    def status(self) -> str: ...


C = TypeVar("C", bound=_HasType)


def find_condition(conditions: Sequence[C], type_: str) -> C | None:
    """The condition of the given type, or None."""
    for cond in conditions:
        if cond.type == type_:
            return cond
    return None


def condition_is_true(conditions: Sequence[_HasTypeAndStatus], type_: str) -> bool:
    """Whether the condition of the given type exists and has status "True"."""
    cond = find_condition(conditions, type_)
    return cond is not None and cond.status == "True"


# --- timestamps ---------------------------------------------------------------------------------


def parse_time(value: str) -> dt.datetime:
    """Parse an RFC 3339 timestamp (metav1.Time or MicroTime) into an aware datetime."""
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"invalid RFC 3339 timestamp {value!r}") from None
    if parsed.tzinfo is None:
        raise ValueError(f"invalid RFC 3339 timestamp {value!r}: no time zone")
    return parsed


@functools.lru_cache(maxsize=64)
def format_time(when: dt.datetime) -> str:
    """Format as metav1.Time does: UTC, whole seconds, "Z". Kept for the last few instants:
    one is formatted again and again (every status write of a sync, every condition of a
    session)."""
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(when: dt.datetime) -> str:
    """Format as metav1.MicroTime does: UTC, microseconds, "Z"."""
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
