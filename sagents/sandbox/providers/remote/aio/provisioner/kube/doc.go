// Package kube is the provisioner's Kubernetes backend: an orchestrator.Backend
// that runs each sandbox as a Pod plus a Service in one namespace, with
// client-go.
//
// Objects. For sandbox id S the Pod and the Service are both named
// <prefix>-S (or <prefix>-h<hash> when S is not a valid DNS label), carry
// the labels app.kubernetes.io/managed-by=sage-provisioner,
// app.kubernetes.io/name=sage-sandbox, sage.dev/sandbox and sage.dev/thread
// (the ids, or hashes of them when they are not valid label values), and
// the exact ids in annotations. The Service selects the Pod by its
// sandbox label and is owned by it (ownerReference), so the garbage
// collector removes it with the Pod even if a Destroy is interrupted.
//
// The Pod runs the sandbox image with one container port, readiness and
// liveness probes on HTTP GET /v1/sandbox (with the sandbox's bearer token
// when it has one), resource requests and limits, seccomp RuntimeDefault,
// no privilege escalation, all capabilities dropped, runAsNonRoot with a
// fixed non-root UID unless Options.AllowRoot, no service-account token
// and no service links. The only host mounts are those in the request,
// which the provisioner server has already checked against its allowlist.
//
// The sandbox URL is the Service's cluster DNS name and port
// (http://<name>.<namespace>.svc.<cluster domain>:<port>), or, for a
// NodePort Service, http://<NodeHost>:<nodePort>, or, with
// Options.PodAddress, the Pod's own IP (Create waits for it), for clients
// on the pod network without cluster DNS or kube-proxy.
//
// Each thread directory (/mnt/user-data/workspace, uploads, outputs) that
// no requested mount provides is an emptyDir of the Pod, writable by the
// sandbox's non-root user. Options.RuntimeClass sets runtimeClassName.
//
// Warm pool. A request with PoolSlot makes a pool Pod: labelled
// sage.dev/pool=<slot>, its Service selecting it by that label. Claim
// (orchestrator.Pooler; the provisioner API's POST /api/pool/{slot}/claim)
// rewrites the Pod's sandbox and thread labels and annotations, fencing
// token and activity in one merge patch carrying the resourceVersion it
// read, so one claimer of a Pod wins; names cannot change, so a claimed
// sandbox keeps its slot's Pod and Service names (SandboxInfo.PoolSlot
// says which). ListPool lists the unclaimed ones; ListRunning the others.
// The pool itself is the orchestrator's (pool_size of the aio provider).
//
// Races. Create of an existing sandbox adopts the Pod and Service that
// are there (AlreadyExists is how another provisioner replica's win shows
// up), provided they are ours (managed-by label and sandbox-id annotation).
//
// Idle reaping. Discover (the server's GET) stamps the Pod's
// sage.dev/last-activity annotation, at most once per Options.TouchEvery;
// Create sets it. Reap deletes sandboxes whose last activity (else
// creation time) is older than a TTL, and Pods that have failed or
// finished. Deletion uses the Pod's resourceVersion as a precondition, so
// a touch that lands between the scan and the delete saves the sandbox.
//
// The API: Connect and DefaultNamespace find the cluster; New (with
// Options) gives the Backend that cmd/sage-provisioner serves, an
// orchestrator.Backend and orchestrator.Pooler, whose RunReaper (Reap is
// one pass) takes ReapOptions; ErrNoPod is what Adopt returns for a
// sandbox whose Pod is gone. The label and annotation names above are
// the package's own constants: they are a contract with the cluster (the
// manifests and kubectl selectors spell them), not with Go callers.
//
// Tests. Most use client-go's fake clientset. TestRealAPIServer runs a
// real kube-apiserver (built by `make kube` at the client-go's release)
// and etcd on loopback: the deploy/kubernetes manifests applied with
// strict server-side validation, the provisioner's own ServiceAccount
// token and Role, Pod Security "restricted" admission, adoption, the
// reaper's preconditions. No kubelet or controller-manager runs there:
// readiness is a status the test writes, and nothing garbage-collects, so
// Destroy's explicit deletes of both objects are what is checked.
// TestRealNode (node_test.go starts the cluster) adds kube-scheduler,
// kube-controller-manager, a containerd of its own and a kubelet: sandbox
// Pods really run, are Ready by their own probes, answer the aio provider
// over the pod network, and the garbage collector removes what they own.
package kube
