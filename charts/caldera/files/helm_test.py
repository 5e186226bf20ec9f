"""`helm test`: every process answers /readyz (its caches synced), and the webhook answers an
AdmissionReview over TLS verified with the CA in its certificate Secret (the chart's, an
existing one, cert-manager's or the webhook's own). Everything comes from the environment, so
e2e/test_chart.py runs this same file against processes on the test machine."""

import http.client
import json
import os
import socket
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request

failures = []
for url in os.environ.get("CALDERA_READYZ_URLS", "").split():
    if not url.startswith("http://"):
        failures.append(url)
        continue
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 - http only
            status = str(answer.status)
    except urllib.error.HTTPError as exc:
        status = f"{exc.code} {exc.read().decode(errors='replace').strip()}"
    except OSError as exc:
        status = str(exc)
    print(f"{url}: {status}")
    if status != "200":
        failures.append(url)

webhook = os.environ.get("CALDERA_WEBHOOK_URL")
if webhook:
    target = urllib.parse.urlsplit(webhook)
    context = ssl.create_default_context(cafile=os.environ["CALDERA_WEBHOOK_CA"])
    # Connect there (host:port) while verifying the certificate for the URL's host name.
    connect = os.environ.get("CALDERA_WEBHOOK_CONNECT", target.netloc)
    host, _, port = connect.rpartition(":")

    class Connection(http.client.HTTPSConnection):
        def connect(self) -> None:
            sock = socket.create_connection((host, int(port)), timeout=10)
            self.sock = context.wrap_socket(sock, server_hostname=target.hostname)

    queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue"}
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "helm-test",
            "kind": {"group": "scheduling.volcano.sh", "version": "v1beta1", "kind": "Queue"},
            "resource": {
                "group": "scheduling.volcano.sh",
                "version": "v1beta1",
                "resource": "queues",
            },
            "name": "helm-test",
            "operation": "CREATE",
            "object": {**queue, "metadata": {"name": "helm-test"}, "spec": {}},
        },
    }
    try:
        conn = Connection(target.hostname or "", timeout=10)
        headers = {"Content-Type": "application/json"}
        conn.request("POST", target.path, json.dumps(review), headers)
        answer = json.loads(conn.getresponse().read())
        allowed = answer["response"]["allowed"]
        print(f"{webhook}: allowed={allowed}")
        if allowed is not True:
            failures.append(webhook)
    except (OSError, ValueError, KeyError) as exc:
        print(f"{webhook}: {exc}")
        failures.append(webhook)

if failures:
    print("not answering:", " ".join(failures))
sys.exit(1 if failures else 0)
