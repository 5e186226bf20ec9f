#!/usr/bin/env bash
# Run Caldera's e2e suite against kind instead of the local control plane (needs Docker, kind,
# kubectl and network access to registry.k8s.io). Untested on the development machines, which
# have no container engine; the local control plane (make test) is what CI runs.
#
#   e2e/kind/up.sh            create the cluster, install kwok with Caldera's stages, add fake nodes
#   e2e/kind/up.sh --test     ... then run the e2e suite against it (the suite starts its own
#                             Caldera processes, so do not combine it with --install)
#   e2e/kind/up.sh --install  ... then build the image with Docker, load it into kind and
#                             `helm install` the chart (docs/install.md, "On kind")
#
# Environment: KWOK_VERSION, IMAGE (default caldera:dev), RELEASE (caldera), NAMESPACE
# (caldera-system), HELM (default: helm on PATH, else the one e2e/cluster/build.sh builds).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
name=caldera
kubeconfig="$repo/.cluster/kind-kubeconfig"
mkdir -p "$repo/.cluster"

kind get clusters | grep -qx "$name" || kind create cluster --config "$here/kind-config.yaml"
kind get kubeconfig --name "$name" > "$kubeconfig"
export KUBECONFIG=$kubeconfig

# kwok in the cluster: its CRDs and controller from the release, then Caldera's own stages, which
# replace kwok's stock ones (those would complete every pod owned by a Volcano Job at once).
base="https://github.com/kubernetes-sigs/kwok/releases/download/$KWOK_VERSION"
kubectl apply -f "$base/kwok.yaml"
kubectl apply -f "$repo/e2e/cluster/stages.yaml"
kubectl -n kube-system rollout status deployment/kwok-controller --timeout=180s

"$repo/.venv/bin/python" - "$kubeconfig" <<'PY'
import json, subprocess, sys
sys.path.insert(0, ".")
from e2e.conftest import NODE_COUNT, NODE_SPEC
items = [NODE_SPEC.manifest(f"kwok-node-{i}") for i in range(NODE_COUNT)]
subprocess.run(["kubectl", "apply", "-f", "-"], input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}),
               text=True, check=True)
PY
nodes=$(seq -s, -f 'kwok-node-%g' 0 3)
echo "export CALDERA_E2E_KUBECONFIG=$kubeconfig CALDERA_E2E_NODES=$nodes"
case "${1:-}" in
  --test)
    CALDERA_E2E_KUBECONFIG=$kubeconfig CALDERA_E2E_NODES=$nodes "$repo/.venv/bin/pytest" e2e
    ;;
  --install)
    IMAGE=${IMAGE:-caldera:dev}
    RELEASE=${RELEASE:-caldera}
    NAMESPACE=${NAMESPACE:-caldera-system}
    HELM=${HELM:-$(command -v helm || echo "$(bash "$repo/e2e/cluster/build.sh" helm)/helm")}
    docker build -t "$IMAGE" "$repo"
    kind load docker-image "$IMAGE" --name "$name"
    # pullPolicy Never: the nodes use the image kind just loaded, never a registry.
    "$HELM" upgrade --install "$RELEASE" "$repo/charts/caldera" \
      --namespace "$NAMESPACE" --create-namespace \
      --set image.repository="${IMAGE%:*}" --set image.tag="${IMAGE##*:}" \
      --set image.pullPolicy=Never \
      --wait --timeout 5m
    kubectl -n "$NAMESPACE" get pods -o wide
    echo "Caldera is installed; try: kubectl apply -f $repo/examples/tensorflow-job.yaml"
    ;;
  "") ;;
  *) echo "usage: $0 [--test|--install]" >&2; exit 2 ;;
esac
