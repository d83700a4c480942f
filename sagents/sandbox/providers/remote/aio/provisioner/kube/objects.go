package kube

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/sage-go/sage/sagents/sandbox/driver"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
)

// selectorAll matches every object this backend manages.
var selectorAll = labelManagedBy + "=" + managedBy

func sandboxSelector(id string) string {
	return selectorAll + "," + labelSandbox + "=" + labelFor(id)
}

func (b *Backend) meta(req orchestrator.CreateRequest) metav1.ObjectMeta {
	labels := map[string]string{labelManagedBy: managedBy, labelName: appName, labelSandbox: labelFor(req.SandboxID)}
	ann := map[string]string{annotationSandboxID: req.SandboxID}
	if req.ThreadID != "" {
		labels[labelThread] = labelFor(req.ThreadID)
		ann[annotationThreadID] = req.ThreadID
	}
	if req.Owner != "" {
		ann[annotationOwner] = req.Owner
	}
	if req.PoolSlot != "" {
		labels[labelPool] = labelFor(req.PoolSlot)
	}
	return metav1.ObjectMeta{Name: objectName(b.o.NamePrefix, req.SandboxID), Namespace: b.o.Namespace, Labels: labels, Annotations: ann}
}

func (b *Backend) buildPod(req orchestrator.CreateRequest) *corev1.Pod {
	meta := b.meta(req)
	meta.Annotations[annotationActivity] = b.o.Now().UTC().Format(time.RFC3339Nano)
	vols, mounts := volumes(req)
	return &corev1.Pod{
		ObjectMeta: meta,
		Spec: corev1.PodSpec{
			Containers:                   []corev1.Container{b.container(req, mounts)},
			Volumes:                      vols,
			RestartPolicy:                corev1.RestartPolicyAlways,
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
			SecurityContext:              b.podSecurity(),
			RuntimeClassName:             runtimeClass(b.o.RuntimeClass),
		},
	}
}

func runtimeClass(name string) *string {
	if name == "" {
		return nil
	}
	return &name
}

func (b *Backend) container(req orchestrator.CreateRequest, mounts []corev1.VolumeMount) corev1.Container {
	return corev1.Container{
		Name:            containerNm,
		Image:           req.Image,
		ImagePullPolicy: b.o.PullPolicy,
		Ports:           []corev1.ContainerPort{{Name: portName, ContainerPort: int32(req.Port), Protocol: corev1.ProtocolTCP}},
		Env:             append(envVars(req.Env), b.allowedHostsEnv(req)),
		ReadinessProbe:  probe(req.Token, 1, 2, 3),
		LivenessProbe:   probe(req.Token, 10, 10, 3),
		Resources:       b.resources(req),
		VolumeMounts:    mounts,
		SecurityContext: &corev1.SecurityContext{
			Privileged:               ptr.To(false),
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
}

func (b *Backend) podSecurity() *corev1.PodSecurityContext {
	sc := &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	if !b.o.AllowRoot {
		sc.RunAsNonRoot = ptr.To(true)
		sc.RunAsUser = ptr.To(b.o.RunAsUser)
		sc.RunAsGroup = ptr.To(b.o.RunAsUser)
		sc.FSGroup = ptr.To(b.o.RunAsUser)
	}
	return sc
}

// probe is an HTTP GET of /v1/sandbox on the named port, with the bearer
// token when the sandbox requires one.
func probe(token string, initialDelay, period, failures int32) *corev1.Probe {
	get := &corev1.HTTPGetAction{Path: "/v1/sandbox", Port: intstr.FromString(portName)}
	if token != "" {
		get.HTTPHeaders = []corev1.HTTPHeader{{Name: "Authorization", Value: "Bearer " + token}}
	}
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: get}, InitialDelaySeconds: initialDelay,
		PeriodSeconds: period, TimeoutSeconds: 2, FailureThreshold: failures, SuccessThreshold: 1}
}

func (b *Backend) resources(req orchestrator.CreateRequest) corev1.ResourceRequirements {
	r := b.res
	cpuLim, memLim := r.cpuLim, r.memLim
	if req.CPUs > 0 {
		cpuLim = *resource.NewMilliQuantity(int64(req.CPUs*1000), resource.DecimalSI)
	}
	if req.MemoryMB > 0 {
		memLim = *resource.NewQuantity(int64(req.MemoryMB)<<20, resource.BinarySI)
	}
	cpuReq, memReq := minQ(r.cpuReq, cpuLim), minQ(r.memReq, memLim)
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: cpuReq, corev1.ResourceMemory: memReq, corev1.ResourceEphemeralStorage: r.ephLim},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: cpuLim, corev1.ResourceMemory: memLim, corev1.ResourceEphemeralStorage: r.ephLim},
	}
}

// minQ keeps a request from exceeding its limit (the API server refuses
// that).
func minQ(req, lim resource.Quantity) resource.Quantity {
	if req.Cmp(lim) > 0 {
		return lim
	}
	return req
}

func envVars(env map[string]string) []corev1.EnvVar {
	out := make([]corev1.EnvVar, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, corev1.EnvVar{Name: k, Value: env[k]})
	}
	return out
}

// allowedHostsEnv lets sandboxd serve the names clients reach it by (its
// Service's cluster DNS names, the NodePort host): sandboxd answers only
// loopback and listed Host values, against DNS rebinding.
func (b *Backend) allowedHostsEnv(req orchestrator.CreateRequest) corev1.EnvVar {
	name, ns := objectName(b.o.NamePrefix, req.SandboxID), b.o.Namespace
	hosts := []string{name, name + "." + ns, name + "." + ns + ".svc", name + "." + ns + ".svc." + b.o.ClusterDomain}
	if b.o.ServiceType == corev1.ServiceTypeNodePort && b.o.NodeHost != "" {
		hosts = append(hosts, b.o.NodeHost)
	}
	return corev1.EnvVar{Name: "SAGE_SANDBOXD_ALLOWED_HOSTS", Value: strings.Join(hosts, ",")}
}

// volumes turns the request's mounts (already checked by the server's
// allowlist) into hostPath volumes; nothing else from the host is
// mounted. Each of the thread's directories (/mnt/user-data/workspace,
// uploads, outputs) that no request mount provides is an emptyDir of the
// Pod's own: the image's are root's, and the sandbox runs as a non-root
// user who must be able to write its workspace.
func volumes(req orchestrator.CreateRequest) ([]corev1.Volume, []corev1.VolumeMount) {
	var vols []corev1.Volume
	var mounts []corev1.VolumeMount
	for i, m := range req.Mounts {
		name := "mount-" + strconv.Itoa(i)
		vols = append(vols, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: m.HostPath, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}})
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: m.SandboxPath, ReadOnly: m.ReadOnly})
	}
	for _, d := range []string{"workspace", "uploads", "outputs"} {
		target := orchestrator.UserDataPath + "/" + d
		if slices.ContainsFunc(req.Mounts, func(m driver.VolumeMount) bool {
			return target == m.SandboxPath || strings.HasPrefix(target, strings.TrimSuffix(m.SandboxPath, "/")+"/")
		}) {
			continue
		}
		name := "user-data-" + d
		vols = append(vols, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: target})
	}
	return vols, mounts
}

func (b *Backend) buildService(req orchestrator.CreateRequest, owner *corev1.Pod) *corev1.Service {
	meta := b.meta(req)
	meta.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: owner.Name, UID: owner.UID}}
	return &corev1.Service{
		ObjectMeta: meta,
		Spec: corev1.ServiceSpec{
			Type:     b.o.ServiceType,
			Selector: b.serviceSelector(req),
			Ports: []corev1.ServicePort{{Name: portName, Port: int32(req.Port), Protocol: corev1.ProtocolTCP,
				TargetPort: intstr.FromString(portName)}},
		},
	}
}

// serviceSelector selects the sandbox's Pod: by its pool slot for a
// pool Pod (a claim changes its sandbox label, never its slot), else by
// its sandbox id.
func (b *Backend) serviceSelector(req orchestrator.CreateRequest) map[string]string {
	if req.PoolSlot != "" {
		return map[string]string{labelManagedBy: managedBy, labelPool: labelFor(req.PoolSlot)}
	}
	return map[string]string{labelManagedBy: managedBy, labelSandbox: labelFor(req.SandboxID)}
}

// sandboxURL is the URL clients use for the sandbox of pod and svc: the
// Pod's IP with PodAddress, else the Service's.
func (b *Backend) sandboxURL(pod *corev1.Pod, svc *corev1.Service) (string, error) {
	if !b.o.PodAddress {
		return b.serviceURL(svc)
	}
	if pod.Status.PodIP == "" {
		return "", fmt.Errorf("kube: pod %s has no IP yet: %w", pod.Name, errNoPodIP)
	}
	var port int32
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == portName {
				port = p.ContainerPort
			}
		}
	}
	if port == 0 {
		return "", fmt.Errorf("kube: pod %s has no %q container port", pod.Name, portName)
	}
	return "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(port))), nil
}

// serviceURL is the URL clients use for the sandbox behind svc.
func (b *Backend) serviceURL(svc *corev1.Service) (string, error) {
	var port corev1.ServicePort
	for _, p := range svc.Spec.Ports {
		if p.Name == portName {
			port = p
		}
	}
	if port.Port == 0 {
		return "", fmt.Errorf("kube: service %s has no %q port", svc.Name, portName)
	}
	if svc.Spec.Type == corev1.ServiceTypeNodePort {
		if port.NodePort == 0 {
			return "", fmt.Errorf("kube: service %s has no node port allocated", svc.Name)
		}
		return "http://" + net.JoinHostPort(b.o.NodeHost, strconv.Itoa(int(port.NodePort))), nil
	}
	return fmt.Sprintf("http://%s.%s.svc.%s:%d", svc.Name, svc.Namespace, b.o.ClusterDomain, port.Port), nil
}
