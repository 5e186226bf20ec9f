"""The queue controller's re-check of a queue Command: trusted namespace, or a stamped
requester whom the API server allows to update the queue; anything else refused with a reason,
never an exception."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from caldera.api.authz import (
    REQUESTED_BY_KEY,
    Requester,
    SubjectAccessReviewStatus,
    encode_requester,
)
from caldera.api.meta import ObjectMeta, OwnerReference
from caldera.api.volcano import Command
from caldera.settings import ControllersSettings
from controllers.queue.access import Ask, Refuse, Run, access_answer, command_access

TARGET = OwnerReference(
    api_version="scheduling.volcano.sh/v1beta1", kind="Queue", name="q1", uid="u"
)
TRUSTED = frozenset({"caldera-system"})
EDITOR = Requester(user="system:serviceaccount:team-a:dev", groups=("system:authenticated",))


def command(namespace: str = "team-a", stamp: str | None = None) -> Command:
    annotations = {REQUESTED_BY_KEY: stamp} if stamp is not None else {}
    meta = ObjectMeta(name="c", namespace=namespace, annotations=annotations)
    return Command(metadata=meta, action="CloseQueue", target=TARGET)


def test_a_command_in_a_trusted_namespace_runs_unasked() -> None:
    """The trusted namespace needs no stamp and no question."""
    assert command_access(command("caldera-system"), TRUSTED) == Run()


def test_an_unstamped_command_elsewhere_is_refused() -> None:
    """No stamp outside the trusted namespaces: refused, the reason naming the namespace, the
    trusted ones and the missing annotation."""
    decision = command_access(command(), TRUSTED)
    assert isinstance(decision, Refuse)
    assert "namespace team-a is not trusted" in decision.reason
    assert "caldera-system" in decision.reason
    assert REQUESTED_BY_KEY in decision.reason
    none = command_access(command(), frozenset())
    assert isinstance(none, Refuse)
    assert "(trusted: none)" in none.reason


def test_a_stamped_command_asks_about_the_stamped_user_and_queue() -> None:
    """The question is `update` of the target queue, for the stamped user and groups."""
    decision = command_access(command(stamp=encode_requester(EDITOR)), TRUSTED)
    assert isinstance(decision, Ask)
    assert decision.requester == EDITOR
    spec = decision.review.spec
    assert (spec.user, spec.groups) == (EDITOR.user, EDITOR.groups)
    assert spec.resource_attributes is not None
    attrs = spec.resource_attributes
    assert (attrs.verb, attrs.group, attrs.resource, attrs.name) == (
        "update",
        "scheduling.volcano.sh",
        "queues",
        "q1",
    )


def test_the_answer_decides() -> None:
    """Allowed: run. Denied: refused with the field-error message naming user and queue."""
    cmd = command(stamp=encode_requester(EDITOR))
    assert access_answer(cmd, EDITOR, SubjectAccessReviewStatus(allowed=True)) == Run()
    denied = access_answer(cmd, EDITOR, SubjectAccessReviewStatus(allowed=False))
    assert isinstance(denied, Refuse)
    assert denied.reason.startswith(
        f'target.name: Forbidden: user "{EDITOR.user}" may not update queue "q1"'
    )


def test_malformed_stamps_are_refused_with_the_annotation_named() -> None:
    """Not JSON, the wrong shape, no user, too long: each refused with a message naming the
    annotation."""
    for stamp in ("not json", "[]", '{"user": 3}', "{}", '{"user":"' + "x" * 20000 + '"}'):
        decision = command_access(command(stamp=stamp), TRUSTED)
        assert isinstance(decision, Refuse), stamp
        assert f"metadata.annotations[{REQUESTED_BY_KEY}]" in decision.reason


@settings(max_examples=300, deadline=None)
@given(stamp=st.one_of(st.text(max_size=200), st.binary(max_size=50).map(repr)))
def test_any_stamp_is_refused_or_asked_never_run_nor_raised(stamp: str) -> None:
    """Outside the trusted namespaces no stamp, however written, runs a Command unasked, and
    none raises."""
    decision = command_access(command(stamp=stamp), TRUSTED)
    assert isinstance(decision, Refuse | Ask)


def test_trusted_namespaces_default_to_the_pods_own() -> None:
    """Empty setting: $POD_NAMESPACE, none outside a pod; set: exactly those."""
    empty = ControllersSettings(leader_elect=False)
    assert empty.trusted_command_namespaces({"POD_NAMESPACE": "caldera"}) == {"caldera"}
    assert empty.trusted_command_namespaces({}) == frozenset()
    given_ = ControllersSettings(leader_elect=False, queue_command_namespaces=("a", "b"))
    assert given_.trusted_command_namespaces({"POD_NAMESPACE": "c"}) == {"a", "b"}
