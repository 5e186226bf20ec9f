"""The ``resource.k8s.io/v1`` kinds (Dynamic Resource Allocation) as plain JSON objects, for the
tests, the fake DRA driver and the DRA benchmark: they write and read manifests as Kubernetes
documents them, independently of any model Caldera itself has for these kinds."""

from __future__ import annotations

from typing import Any, Final, TypeAlias

from caldera.api.kinds import KindInfo

Json: TypeAlias = dict[str, Any]

GROUP: Final = "resource.k8s.io"
VERSION: Final = "v1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

RESOURCE_SLICE: Final[KindInfo[Json]] = KindInfo(
    "ResourceSlice", GROUP, VERSION, "resourceslices", False, dict
)
DEVICE_CLASS: Final[KindInfo[Json]] = KindInfo(
    "DeviceClass", GROUP, VERSION, "deviceclasses", False, dict
)
RESOURCE_CLAIM: Final[KindInfo[Json]] = KindInfo(
    "ResourceClaim", GROUP, VERSION, "resourceclaims", True, dict
)
RESOURCE_CLAIM_TEMPLATE: Final[KindInfo[Json]] = KindInfo(
    "ResourceClaimTemplate", GROUP, VERSION, "resourceclaimtemplates", True, dict
)
# Pods as JSON: the fields DRA adds (spec.resourceClaims, status.resourceClaimStatuses) as sent.
POD_JSON: Final[KindInfo[Json]] = KindInfo("Pod", "", "v1", "pods", True, dict)


def claim_template(name: str, device_class: str, count: int = 1) -> Json:
    """A ResourceClaimTemplate whose claims ask for ``count`` devices of ``device_class``."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {"deviceClassName": device_class, "count": count},
                        }
                    ]
                }
            }
        },
    }


def pod_with_claims(
    name: str,
    scheduler: str,
    templates: dict[str, str],
    *,
    annotations: dict[str, str] | None = None,
) -> Json:
    """A pod whose one container uses one claim per entry of ``templates`` (claim name ->
    ResourceClaimTemplate name); tolerating every taint, as kwok nodes have some."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "schedulerName": scheduler,
            "tolerations": [{"operator": "Exists"}],
            "resourceClaims": [
                {"name": claim, "resourceClaimTemplateName": template}
                for claim, template in templates.items()
            ],
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"claims": [{"name": claim} for claim in templates]},
                }
            ],
        },
    }
