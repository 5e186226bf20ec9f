"""Generated job specs (3,000 in the suite; CALDERA_WEBHOOK_EXAMPLES for more), valid and not,
sent straight to the admission handler.

The generator mixes plausible jobs (most admitted) with wild ones: wrong JSON types anywhere,
huge and negative integers, nonsense strings, missing and extra keys. For every review the
handler must answer (no exception), never with a server error, and every refusal must name the
field it is about: each `;`-separated fragment of the message starts with a field path.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from typing import Any, Final

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unit.webhook_fixtures import queue, review
from webhooks.review import Admission, AdmissionOptions, decode_response
from webhooks.view import StaticView

ADMISSION = Admission(
    StaticView(
        [queue("default"), queue("closed", state="Closed"), queue("p"), queue("c", parent="p")]
    ),
    AdmissionOptions(),
)
FIELD: Final = re.compile(r"^(object|oldObject|metadata|spec|status)([.\[:]|$)")
# 3,000 in the suite (11 s of CPU; 10,000 ran past pytest's 300 s limit
# at load 16); CALDERA_WEBHOOK_EXAMPLES=10000 for a longer hunt.
EXAMPLES: Final = int(os.environ.get("CALDERA_WEBHOOK_EXAMPLES", "3000"))

# --- building blocks ----------------------------------------------------------------------------

HUGE = st.sampled_from([2**31, -(2**31) - 1, 2**63, -(2**63), 2**64 + 1, 10**30])
INTS = st.one_of(st.integers(-3, 12), st.integers(-(2**70), 2**70), HUGE)
JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly the right type, sometimes anything."""
    return st.one_of(strategy, strategy, strategy, JUNK)


NAMES = st.one_of(
    st.sampled_from(["a", "worker", "master", "ps", "evaluator", "", "Bad_Name", "x" * 70]),
    st.text(max_size=70),
)
GOOD_NAMES = st.sampled_from(["a", "b", "worker", "master", "ps", "eval"])
QUANTITIES = st.one_of(
    st.sampled_from(["1", "500m", "1Gi", "2.5", "1e3", "lots", "-1", "", "1.5.5", "9" * 2000]),
    st.integers(-10, 10**25),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
)
RESOURCES = st.dictionaries(
    st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "storage"]), QUANTITIES, max_size=3
)
CONTAINER = st.fixed_dictionaries(
    {"name": maybe(NAMES)},
    optional={
        "image": maybe(st.text(max_size=10)),
        "resources": maybe(
            st.fixed_dictionaries(
                {}, optional={"requests": maybe(RESOURCES), "limits": maybe(RESOURCES)}
            )
        ),
    },
)
POD_SPEC = st.fixed_dictionaries(
    {},
    optional={
        "containers": maybe(st.lists(maybe(CONTAINER), max_size=3)),
        "initContainers": maybe(st.lists(maybe(CONTAINER), max_size=2)),
        "hostNetwork": maybe(st.booleans()),
        "dnsPolicy": maybe(st.sampled_from(["ClusterFirst", "Default", "Google"])),
        "restartPolicy": maybe(st.sampled_from(["Never", "OnFailure", "Sometimes"])),
        "volumes": maybe(
            st.lists(maybe(st.fixed_dictionaries({"name": maybe(NAMES)})), max_size=2)
        ),
    },
)
TEMPLATE = st.fixed_dictionaries({}, optional={"spec": maybe(POD_SPEC)})
EVENTS = st.sampled_from(["*", "PodFailed", "PodEvicted", "TaskCompleted", "OutOfSync", "Boom"])
ACTIONS = st.sampled_from(["AbortJob", "RestartJob", "CompleteJob", "SyncJob", "Explode", ""])
POLICY = st.fixed_dictionaries(
    {},
    optional={
        "event": maybe(EVENTS),
        "events": maybe(st.lists(EVENTS, max_size=3)),
        "action": maybe(ACTIONS),
        "exitCode": maybe(INTS),
        "timeout": maybe(st.sampled_from(["1m", "30s", "soon", "-1s", "1h2m"])),
    },
)
POLICIES = maybe(st.lists(maybe(POLICY), max_size=3))
NETWORK = st.fixed_dictionaries(
    {},
    optional={
        "mode": maybe(st.sampled_from(["hard", "soft", "loose"])),
        "highestTierAllowed": maybe(INTS),
        "highestTierName": maybe(st.text(max_size=5)),
    },
)
TASK = st.fixed_dictionaries(
    {},
    optional={
        "name": maybe(NAMES),
        "replicas": maybe(INTS),
        "minAvailable": maybe(INTS),
        "template": maybe(TEMPLATE),
        "policies": POLICIES,
        "topologyPolicy": maybe(st.sampled_from(["none", "single-numa-node", "all"])),
        "maxRetry": maybe(INTS),
        "dependsOn": maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "name": maybe(st.lists(NAMES, max_size=3)),
                    "iteration": maybe(st.sampled_from(["any", "all", "some"])),
                },
            )
        ),
        "partitionPolicy": maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "totalPartitions": maybe(INTS),
                    "partitionSize": maybe(INTS),
                    "minPartitions": maybe(INTS),
                    "networkTopology": maybe(NETWORK),
                },
            )
        ),
        "volumeClaimTemplates": maybe(
            st.lists(
                maybe(
                    st.fixed_dictionaries(
                        {"metadata": maybe(st.fixed_dictionaries({"name": maybe(NAMES)}))},
                        optional={
                            "spec": maybe(
                                st.fixed_dictionaries(
                                    {},
                                    optional={
                                        "resources": maybe(
                                            st.fixed_dictionaries(
                                                {}, optional={"requests": maybe(RESOURCES)}
                                            )
                                        )
                                    },
                                )
                            )
                        },
                    )
                ),
                max_size=2,
            )
        ),
    },
)
PLUGIN_ARGS = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "--port=2222",
                "--port",
                "80",
                "--master=a",
                "--nope",
                "-x=1",
                "--",
                "--disable-network-policy",
                "--ssh-port=70000",
                "master",
            ]
        ),
        st.text(max_size=10),
    ),
    max_size=3,
)
PLUGINS = st.dictionaries(
    st.sampled_from(
        ["svc", "ssh", "env", "mpi", "pytorch", "tensorflow", "mxnet", "ray", "horovod"]
    ),
    maybe(PLUGIN_ARGS),
    max_size=3,
)
SPEC = st.fixed_dictionaries(
    {},
    optional={
        "tasks": maybe(st.lists(maybe(TASK), max_size=4)),
        "minAvailable": maybe(INTS),
        "maxRetry": maybe(INTS),
        "ttlSecondsAfterFinished": maybe(INTS),
        "minSuccess": maybe(INTS),
        "queue": maybe(st.sampled_from(["default", "closed", "p", "c", "root", "ghost", ""])),
        "schedulerName": maybe(st.text(max_size=8)),
        "priorityClassName": maybe(st.text(max_size=8)),
        "plugins": maybe(PLUGINS),
        "policies": POLICIES,
        "volumes": maybe(
            st.lists(
                maybe(
                    st.fixed_dictionaries(
                        {},
                        optional={
                            "mountPath": maybe(st.sampled_from(["/d", "/e", ""])),
                            "volumeClaimName": maybe(NAMES),
                            "volumeClaim": maybe(st.just({"accessModes": ["ReadWriteOnce"]})),
                        },
                    )
                ),
                max_size=3,
            )
        ),
        "networkTopology": maybe(NETWORK),
        "unknownField": JUNK,
    },
)
WILD_JOB = st.fixed_dictionaries(
    {
        "apiVersion": st.just("batch.volcano.sh/v1alpha1"),
        "kind": st.just("Job"),
        "metadata": maybe(
            st.fixed_dictionaries({"name": maybe(NAMES), "namespace": st.just("ns")})
        ),
    },
    optional={"spec": maybe(SPEC)},
)


@st.composite
def plausible_job(draw: st.DrawFn) -> dict[str, Any]:
    """A job a user might write: good names and shapes, with the odd mistake."""
    names = draw(st.lists(GOOD_NAMES, min_size=1, max_size=3, unique=True))
    tasks = []
    for name in names:
        replicas = draw(st.integers(0, 8))
        t: dict[str, Any] = {
            "name": name,
            "replicas": replicas,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "image": "busybox",
                            "resources": {
                                "requests": {"cpu": draw(st.sampled_from(["1", "500m", "2"]))}
                            },
                        }
                    ]
                }
            },
        }
        if draw(st.booleans()):
            t["minAvailable"] = draw(st.integers(0, replicas + 1))
        if draw(st.booleans()):
            t["policies"] = [{"event": draw(EVENTS), "action": draw(ACTIONS)}]
        tasks.append(t)
    spec: dict[str, Any] = {
        "queue": draw(st.sampled_from(["default", "default", "closed", "c"])),
        "tasks": tasks,
    }
    if draw(st.booleans()):
        spec["plugins"] = draw(
            st.sampled_from(
                [{"env": []}, {"pytorch": []}, {"mpi": []}, {"svc": ["--disable-network-policy"]}]
            )
        )
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": draw(st.sampled_from(["train", "job-1", "a.b"])), "namespace": "ns"},
        "spec": spec,
    }


JOBS = st.one_of(plausible_job(), WILD_JOB)


def _check_fields(message: str) -> None:
    fragments = [f.strip().rstrip(";").strip() for f in message.strip().split("; ")]
    for fragment in fragments:
        if not fragment or fragment.startswith("valid events are"):
            continue  # Volcano's hint after a policy error, which names the field itself
        assert FIELD.match(fragment), f"refusal fragment names no field: {fragment!r}"


def test_generated_jobs_never_crash_and_refusals_name_fields() -> None:
    """EXAMPLES generated reviews: no exception, no server error, every refusal names its field,
    and both admitted and refused jobs occur."""
    results: Counter[str] = Counter()

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        database=None,
    )
    @given(
        job=JOBS,
        old=st.one_of(st.none(), JOBS),
        path=st.sampled_from(["/jobs/mutate", "/jobs/validate"]),
    )
    def check(job: dict[str, Any], old: dict[str, Any] | None, path: str) -> None:
        operation = "CREATE" if old is None else "UPDATE"
        body = json.dumps(review(job, operation=operation, old=old)).encode()
        answer = ADMISSION.review(path, "application/json", body)
        assert answer.status == 200
        response = decode_response(answer.body)
        results[answer.result] += 1
        if response["allowed"]:
            return
        status = response["status"]
        assert status["code"] == 403, status
        _check_fields(status["message"])

    check()
    assert sum(results.values()) == EXAMPLES
    assert results["denied"] > EXAMPLES // 10, results
    assert results["allowed"] + results["patched"] > EXAMPLES // 10, results
