"""Who a request proxied by the API server is for: the front-proxy (requestheader) protocol.

The API server proxies an aggregated API's requests after authenticating and authorising
them, naming the user in headers (``X-Remote-User``, ``X-Remote-Group``, ``X-Remote-Extra-*``
by default) and presenting its proxy client certificate. Those headers are believed only on a
connection whose client certificate is signed by the requestheader CA (checked in the TLS
handshake: the server requires such a certificate) and whose common name is one of the allowed
names (when any are set), as Kubernetes' own aggregated servers do. The API server publishes
these settings in the ConfigMap ``kube-system/extension-apiserver-authentication``;
``RequestHeaderConfig.from_configmap`` reads them, ``identity`` reads a request's user.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

CONFIGMAP_NAMESPACE = "kube-system"
CONFIGMAP_NAME = "extension-apiserver-authentication"
MAX_GROUPS = 256  # a user with more groups than that is not one a real authenticator makes
MAX_EXTRA_VALUES = 256


class RequestHeaderError(ValueError):
    """The ConfigMap lacks a requestheader setting or holds a malformed one."""


@dataclass(frozen=True)
class RequestHeaderConfig:
    """The front-proxy settings of the API server."""

    client_ca: str  # PEM
    allowed_names: tuple[str, ...] = ()
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    group_headers: tuple[str, ...] = ("X-Remote-Group",)
    extra_prefixes: tuple[str, ...] = ("X-Remote-Extra-",)
    uid_headers: tuple[str, ...] = ()

    @classmethod
    def from_configmap(cls, data: Mapping[str, str]) -> RequestHeaderConfig:
        ca = data.get("requestheader-client-ca-file", "")
        if "BEGIN CERTIFICATE" not in ca:
            raise RequestHeaderError(
                f"{CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME}: no requestheader-client-ca-file; "
                "start kube-apiserver with --requestheader-client-ca-file and "
                "--proxy-client-cert-file to serve an aggregated API"
            )

        def names(key: str, default: tuple[str, ...]) -> tuple[str, ...]:
            text = data.get(key)
            if text is None or text == "":
                return default
            try:
                value = json.loads(text)
            except ValueError:
                raise RequestHeaderError(f"{CONFIGMAP_NAME}: {key} is not JSON") from None
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise RequestHeaderError(f"{CONFIGMAP_NAME}: {key} is not a list of strings")
            return tuple(value)

        return cls(
            client_ca=ca,
            allowed_names=names("requestheader-allowed-names", ()),
            username_headers=names("requestheader-username-headers", ("X-Remote-User",)),
            group_headers=names("requestheader-group-headers", ("X-Remote-Group",)),
            extra_prefixes=names("requestheader-extra-headers-prefix", ("X-Remote-Extra-",)),
            uid_headers=names("requestheader-uid-headers", ()),
        )

    def proxy_allowed(self, common_name: str | None) -> bool:
        """Whether a verified client certificate with ``common_name`` is the API server's."""
        if not self.allowed_names:
            return True
        return common_name is not None and common_name in self.allowed_names


@dataclass(frozen=True)
class Identity:
    """The user a proxied request is for."""

    user: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def common_name(peercert: Mapping[str, object] | None) -> str | None:
    """The subject's common name in ``ssl.SSLSocket.getpeercert()``'s form."""
    if not peercert:
        return None
    subject = peercert.get("subject", ())
    if not isinstance(subject, tuple):
        return None
    for rdn in subject:
        for pair in rdn:
            if isinstance(pair, tuple) and len(pair) == 2 and pair[0] == "commonName":
                return str(pair[1])
    return None


def identity(config: RequestHeaderConfig, headers: Iterable[tuple[str, str]]) -> Identity | None:
    """The user the headers name, or None when they name none."""
    pairs = [(k.lower(), v) for k, v in headers]
    user = next((v for h in config.username_headers for k, v in pairs if k == h.lower() and v), "")
    if not user:
        return None
    group_names = {h.lower() for h in config.group_headers}
    groups = tuple(v for k, v in pairs if k in group_names and v)[:MAX_GROUPS]
    uid = next((v for h in config.uid_headers for k, v in pairs if k == h.lower() and v), "")
    extra: dict[str, list[str]] = {}
    prefixes = [p.lower() for p in config.extra_prefixes]
    for key, value in pairs:
        for prefix in prefixes:
            if key.startswith(prefix) and len(key) > len(prefix):
                name = urllib.parse.unquote(key[len(prefix) :])
                values = extra.setdefault(name, [])
                if len(values) < MAX_EXTRA_VALUES:
                    values.append(value)
                break
    return Identity(
        user=user, groups=groups, uid=uid, extra={k: tuple(v) for k, v in extra.items()}
    )
