package kube

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
)

// Options configure a Backend. Zero values take the defaults named.
type Options struct {
	// Client is the clientset (kubernetes.NewForConfig, or fake.NewClientset
	// in tests). Required.
	Client kubernetes.Interface
	// Namespace holds the sandboxes. Required.
	Namespace string
	// ServiceType is ClusterIP (default) or NodePort.
	ServiceType corev1.ServiceType
	// NodeHost is the host clients reach NodePorts on; required with
	// NodePort.
	NodeHost string
	// ClusterDomain is the cluster's DNS domain; default cluster.local.
	ClusterDomain string
	// PodAddress makes a sandbox's URL its Pod's own IP
	// (http://<pod IP>:<port>) instead of its Service's cluster DNS name
	// (or node port): for clients on the pod network that have neither
	// cluster DNS nor kube-proxy, such as flat pod networks whose pod IPs
	// the clients route, or a single node whose CNI bridge the host
	// reaches. Create then waits, within its context and PodAddressWait,
	// for the Pod to be given an IP; Discover and ListRunning leave out a
	// Pod that has none (yet).
	PodAddress bool
	// PodAddressWait bounds Create's wait for the Pod's IP with
	// PodAddress; default 2 minutes (scheduling plus the sandbox's network).
	PodAddressWait time.Duration
	// RuntimeClass, when set, is the Pods' runtimeClassName: a
	// RuntimeClass the cluster defines, e.g. "gvisor" for runsc.
	RuntimeClass string
	// NamePrefix prefixes Pod and Service names; default "sage-sandbox".
	NamePrefix string
	// Image and Port are used when a request leaves them empty; defaults
	// sage-sandbox:dev and 8080.
	Image string
	Port  int
	// PullPolicy defaults to IfNotPresent.
	PullPolicy corev1.PullPolicy
	// Resources: requests default to 100m CPU and 256Mi; limits to 1 CPU,
	// 1Gi and 1Gi of ephemeral storage. A request's MemoryMB and CPUs,
	// when set, replace the memory and CPU limits.
	CPURequest, MemoryRequest, CPULimit, MemoryLimit, EphemeralLimit string
	// RunAsUser is the non-root UID the sandbox runs as; default 1000.
	RunAsUser int64
	// AllowRoot drops runAsNonRoot and RunAsUser, for images that need
	// root (privilege escalation stays off, capabilities stay dropped).
	AllowRoot bool
	// TouchEvery bounds how often Discover rewrites the activity
	// annotation; default 30 s.
	TouchEvery time.Duration
	// Now is the clock; default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// resources holds the parsed quantities.
type resources struct {
	cpuReq, memReq, cpuLim, memLim, ephLim resource.Quantity
}

func (o *Options) setDefaults() {
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	if o.ServiceType == "" {
		o.ServiceType = corev1.ServiceTypeClusterIP
	}
	def(&o.ClusterDomain, "cluster.local")
	def(&o.NamePrefix, "sage-sandbox")
	def(&o.Image, "sage-sandbox:dev")
	def(&o.CPURequest, "100m")
	def(&o.MemoryRequest, "256Mi")
	def(&o.CPULimit, "1")
	def(&o.MemoryLimit, "1Gi")
	def(&o.EphemeralLimit, "1Gi")
	if o.PullPolicy == "" {
		o.PullPolicy = corev1.PullIfNotPresent
	}
	if o.Port == 0 {
		o.Port = 8080
	}
	if o.RunAsUser == 0 {
		o.RunAsUser = 1000
	}
	if o.PodAddressWait <= 0 {
		o.PodAddressWait = 2 * time.Minute
	}
	if o.TouchEvery <= 0 {
		o.TouchEvery = 30 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

func (o *Options) check() (resources, error) {
	var r resources
	switch {
	case o.Client == nil:
		return r, errors.New("kube: Options.Client is nil")
	case o.Namespace == "" || !dnsLabel.MatchString(o.Namespace):
		return r, fmt.Errorf("kube: namespace %q: want a DNS label", o.Namespace)
	case o.ServiceType != corev1.ServiceTypeClusterIP && o.ServiceType != corev1.ServiceTypeNodePort:
		return r, fmt.Errorf("kube: service type %q: want ClusterIP or NodePort", o.ServiceType)
	case o.ServiceType == corev1.ServiceTypeNodePort && o.NodeHost == "":
		return r, errors.New("kube: NodePort services need NodeHost (the address clients reach node ports on)")
	case len(o.NamePrefix) > 40 || !dnsLabel.MatchString(o.NamePrefix):
		return r, fmt.Errorf("kube: name prefix %q: want a DNS label of at most 40 characters", o.NamePrefix)
	case o.Port < 1 || o.Port > 65535:
		return r, fmt.Errorf("kube: port %d out of range", o.Port)
	case o.PodAddress && o.ServiceType == corev1.ServiceTypeNodePort:
		return r, errors.New("kube: PodAddress and a NodePort service contradict each other: clients reach either the pods or the node ports; drop one")
	case o.RuntimeClass != "" && (len(o.RuntimeClass) > 253 || !dnsSubdomain.MatchString(o.RuntimeClass)):
		return r, fmt.Errorf("kube: runtime class %q: want a DNS subdomain such as gvisor", o.RuntimeClass)
	}
	var err error
	for _, q := range []struct {
		name, s string
		dst     *resource.Quantity
	}{{"cpu request", o.CPURequest, &r.cpuReq}, {"memory request", o.MemoryRequest, &r.memReq},
		{"cpu limit", o.CPULimit, &r.cpuLim}, {"memory limit", o.MemoryLimit, &r.memLim},
		{"ephemeral-storage limit", o.EphemeralLimit, &r.ephLim}} {
		if *q.dst, err = resource.ParseQuantity(q.s); err != nil {
			return r, fmt.Errorf("kube: %s %q: %w", q.name, q.s, err)
		}
	}
	return r, nil
}
