#!/usr/bin/env bash
# step: Kubernetes for the kube backend's tests: kube-apiserver, kubelet, kube-scheduler, kube-controller-manager, kubectl (one go build: 385 s from empty caches on an idle 2-core machine, 986 s measured under a load of 6-11; cached after), etcd, containerd, CNI plugins
# parallel: yes
# Builds what is missing of kube-apiserver and the node binaries
# (kubelet, kube-scheduler, kube-controller-manager, kubectl) from
# tools/kube-apiserver (k8s.io/kubernetes at the version of the project's
# client-go, v0.N.M -> v1.N.M) in one `go build`, so they share their
# compilation, into the cache: kube-apiserver-vN as before,
# kube-node-vN/ for the rest. Installs etcd (Debian's etcd-server),
# containerd (with runc) and the CNI plugins (containernetworking-plugins,
# in /usr/lib/cni) for the tests of
# sagents/sandbox/providers/remote/aio/provisioner/kube: TestRealAPIServer
# needs the API server and etcd, TestRealNode all of it. The tests start
# their own containerd (its own socket and directories), never the
# system's. `make kube` runs this step alone. Quick when all are there.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="/usr/local/go/bin:$PATH"
client=$(sed -n 's/^[[:space:]]*k8s.io\/client-go \(v0\.[0-9.]*\).*/\1/p' go.mod | head -n 1)
version=v1.${client#v0.}
if ! grep -q "k8s.io/kubernetes $version" tools/kube-apiserver/go.mod; then
	echo "tools/kube-apiserver requires another k8s.io/kubernetes than $version (client-go $client in go.mod): update it" >&2
	exit 1
fi
bash .ci/apt-need.sh etcd=etcd-server containerd=containerd runc=runc /usr/lib/cni/bridge=containernetworking-plugins
# Debian starts etcd and containerd as services when systemd runs; the
# tests start their own.
cache="${XDG_CACHE_HOME:-$HOME/.cache}/sage"
apiserver="${SAGE_KUBE_APISERVER_BIN:-$cache/kube-apiserver-$version}"
node="${SAGE_KUBE_NODE_DIR:-$cache/kube-node-$version}"
pkgs=()
[ -x "$apiserver" ] || pkgs+=(k8s.io/kubernetes/cmd/kube-apiserver)
for b in kubelet kube-scheduler kube-controller-manager kubectl; do
	[ -x "$node/$b" ] || pkgs+=("k8s.io/kubernetes/cmd/$b")
done
if [ ${#pkgs[@]} -gt 0 ]; then
	echo "building ${pkgs[*]##*/} $version (one go build; about 6.5 minutes on an idle 2-core machine from empty caches, 16.5 under load)"
	tmp="$cache/kube-build-$version.tmp"
	rm -rf "$tmp"
	mkdir -p "$tmp" "$node" "$(dirname "$apiserver")"
	(cd tools/kube-apiserver && CGO_ENABLED=0 go build -trimpath -o "$tmp/" "${pkgs[@]}")
	for p in "${pkgs[@]}"; do
		b=${p##*/}
		if [ "$b" = kube-apiserver ]; then mv "$tmp/$b" "$apiserver"; else mv "$tmp/$b" "$node/$b"; fi
	done
	rm -rf "$tmp"
fi
echo "kube-apiserver $version in $apiserver; kubelet, kube-scheduler, kube-controller-manager, kubectl in $node; etcd $(etcd --version | sed -n 's/^etcd Version: //p'); $(containerd --version | cut -d' ' -f1,3)"
