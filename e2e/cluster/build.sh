#!/usr/bin/env bash
# Build (once) and cache the control-plane binaries the e2e tests run against.
# Each binary is built from Go modules into ~/.cache/caldera/bin/<name>-<version>/ and reused
# afterwards, so a warm run takes seconds. Nothing built here is ever committed.
#
#   KUBE_VERSION  Kubernetes release for kube-apiserver/-controller-manager/-scheduler (v1.36.3)
#   ETCD_VERSION  etcd server release (v3.6.16)
#   KWOK_VERSION  kwok release (v0.8.0)
#   HELM_VERSION  helm release (v3.21.4)
#   CALDERA_CACHE cache root (~/.cache/caldera)
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.36.3}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
HELM_VERSION=${HELM_VERSION:-v3.21.4}
CACHE=${CALDERA_CACHE:-$HOME/.cache/caldera}

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
export GOPATH=${GOPATH:-$CACHE/go}
export GOMODCACHE=${GOMODCACHE:-$CACHE/go/pkg/mod}
export GOCACHE=${GOCACHE:-$CACHE/go-build}

log() { printf '[build] %s\n' "$*" >&2; }

# fresh_module DIR MODULE: an empty wrapper module in DIR, kept apart from every other wrapper so
# that minimal version selection never mixes one project's dependencies into another's.
fresh_module() {
  rm -rf "$1" && mkdir -p "$1" && cd "$1"
  go mod init "$2" >/dev/null 2>&1
}

build_kube() {
  local out="$CACHE/bin/kube-$KUBE_VERSION"
  if [ -x "$out/kube-apiserver" ] && [ -x "$out/kube-controller-manager" ] && [ -x "$out/kube-scheduler" ]; then
    return
  fi
  log "building kube-apiserver, kube-controller-manager, kube-scheduler $KUBE_VERSION (cold: tens of minutes)"
  local staging="v0.${KUBE_VERSION#v1.}" minor
  minor=$(echo "$KUBE_VERSION" | cut -d. -f2)
  fresh_module "$CACHE/src/kube-$KUBE_VERSION" example.invalid/kubebuild
  go mod edit -go=1.26
  local gomod godebug
  gomod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | python3 -c 'import json,sys;print(json.load(sys.stdin)["GoMod"])')
  godebug=$(awk '$1 == "godebug" && $2 ~ /^default=/ {print $2}' "$gomod")
  [ -n "$godebug" ] && go mod edit -godebug="$godebug"
  # k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with local paths;
  # a dependency's replaces are ignored, so map each to its published tag here.
  for m in $(awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" {print $1}' "$gomod"); do
    go mod edit -replace="$m=$m@$staging"
  done
  go mod edit -require="k8s.io/kubernetes@$KUBE_VERSION"
  go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@$KUBE_VERSION" \
    "k8s.io/kubernetes/cmd/kube-controller-manager@$KUBE_VERSION" \
    "k8s.io/kubernetes/cmd/kube-scheduler@$KUBE_VERSION"
  local pkg=k8s.io/component-base/version cpkg=k8s.io/client-go/pkg/version date
  date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  local ldflags="-s -w -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
  ldflags+=" -X $cpkg.gitVersion=$KUBE_VERSION -X $cpkg.gitMajor=1 -X $cpkg.gitMinor=$minor"
  mkdir -p "$out.tmp"
  # One invocation: the three share most of their packages, so they compile once.
  go build -trimpath -tags=selinux,notest,grpcnotrace -ldflags "$ldflags" -o "$out.tmp/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler
  rm -rf "$out" && mv "$out.tmp" "$out"
}

build_etcd() {
  local out="$CACHE/bin/etcd-$ETCD_VERSION"
  [ -x "$out/etcd" ] && return
  log "building etcd $ETCD_VERSION"
  fresh_module "$CACHE/src/etcd-$ETCD_VERSION" example.invalid/etcdbuild
  go get -tool "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  mkdir -p "$out.tmp"
  go build -trimpath -ldflags "-s -w" -o "$out.tmp/etcd" go.etcd.io/etcd/server/v3
  rm -rf "$out" && mv "$out.tmp" "$out"
}

build_kwok() {
  local out="$CACHE/bin/kwok-$KWOK_VERSION"
  [ -x "$out/kwok" ] && return
  log "building kwok $KWOK_VERSION"
  mkdir -p "$out.tmp"
  GOBIN="$out.tmp" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  rm -rf "$out" && mv "$out.tmp" "$out"
}

build_helm() {
  local out="$CACHE/bin/helm-$HELM_VERSION"
  [ -x "$out/helm" ] && return
  log "building helm $HELM_VERSION"
  mkdir -p "$out.tmp"
  GOBIN="$out.tmp" go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  rm -rf "$out" && mv "$out.tmp" "$out"
}

command -v go >/dev/null || { echo "build.sh: Go is required to build the control plane (go >= 1.26)" >&2; exit 1; }
mkdir -p "$CACHE/bin"
targets=${*:-etcd kwok kube helm}
for t in $targets; do ( "build_$t" ); done
# Print the directories the binaries are in, one per line, for callers to put on PATH.
for t in $targets; do
  case $t in
    kube) echo "$CACHE/bin/kube-$KUBE_VERSION" ;;
    etcd) echo "$CACHE/bin/etcd-$ETCD_VERSION" ;;
    kwok) echo "$CACHE/bin/kwok-$KWOK_VERSION" ;;
    helm) echo "$CACHE/bin/helm-$HELM_VERSION" ;;
  esac
done
