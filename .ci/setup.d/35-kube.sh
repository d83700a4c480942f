#!/usr/bin/env bash
# step: kube-apiserver + etcd for the Kubernetes backend's tests (about 8 min the first time on an idle 2-core machine, 77 min measured under heavy load; cached after)
# parallel: yes
# Builds kube-apiserver (tools/kube-apiserver: k8s.io/kubernetes at the
# version of the project's client-go, v0.N.M -> v1.N.M) into the cache
# once, and installs etcd (Debian's etcd-server) for the tests of
# sagents/sandbox/providers/remote/aio/provisioner/kube. `make kube` runs
# this step alone. Quick when both are there.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="/usr/local/go/bin:$PATH"
client=$(sed -n 's/^[[:space:]]*k8s.io\/client-go \(v0\.[0-9.]*\).*/\1/p' go.mod | head -n 1)
version=v1.${client#v0.}
if ! grep -q "k8s.io/kubernetes $version" tools/kube-apiserver/go.mod; then
	echo "tools/kube-apiserver requires another k8s.io/kubernetes than $version (client-go $client in go.mod): update it" >&2
	exit 1
fi
bash .ci/apt-need.sh etcd=etcd-server
# Debian starts etcd as a service when systemd runs; the tests start their own.
bin="${SAGE_KUBE_APISERVER_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/sage/kube-apiserver-$version}"
if [ -x "$bin" ]; then
	echo "kube-apiserver $version in $bin; etcd $(etcd --version | sed -n 's/^etcd Version: //p')"
	exit 0
fi
echo "building kube-apiserver $version into $bin (about 8 minutes on an idle 2-core machine)"
mkdir -p "$(dirname "$bin")"
(cd tools/kube-apiserver && CGO_ENABLED=0 go build -trimpath -o "$bin.tmp" k8s.io/kubernetes/cmd/kube-apiserver)
mv "$bin.tmp" "$bin"
echo "kube-apiserver $version in $bin; etcd $(etcd --version | sed -n 's/^etcd Version: //p')"
