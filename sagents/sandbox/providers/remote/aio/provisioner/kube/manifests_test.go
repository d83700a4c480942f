package kube

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// manifestDir is deploy/kubernetes from this package's directory.
const manifestDir = repoRoot + "/deploy/kubernetes"

// repoRoot is the repository from this package's directory.
const repoRoot = "../../../../../../.."

// TestManifestsDecodeStrictly decodes every document of the example
// manifests into its typed object, refusing unknown or misspelt fields,
// and checks the points that matter: least-privilege RBAC, a locked-down
// provisioner Pod.
func TestManifestsDecodeStrictly(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(manifestDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", manifestDir, err)
	}
	kinds := map[string]int{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(data, []byte("\n---\n")) {
			kind := decodeDoc(t, filepath.Base(f), i, doc)
			kinds[kind]++
		}
	}
	for _, k := range []string{"Namespace", "ServiceAccount", "Role", "RoleBinding", "Deployment", "Service", "RuntimeClass"} {
		if kinds[k] != 1 {
			t.Errorf("%d %s documents, want 1", kinds[k], k)
		}
	}
	if kinds["ClusterRole"]+kinds["ClusterRoleBinding"] != 0 {
		t.Error("cluster-wide RBAC in the manifests")
	}
}

func decodeDoc(t *testing.T, file string, i int, doc []byte) string {
	t.Helper()
	var head struct{ Kind string }
	if err := yaml.Unmarshal(doc, &head); err != nil {
		t.Fatalf("%s #%d: %v", file, i, err)
	}
	var obj any
	switch head.Kind {
	case "Namespace":
		obj = &corev1.Namespace{}
	case "ServiceAccount":
		obj = &corev1.ServiceAccount{}
	case "Service":
		obj = &corev1.Service{}
	case "Role":
		obj = &rbacv1.Role{}
	case "RoleBinding":
		obj = &rbacv1.RoleBinding{}
	case "Deployment":
		obj = &appsv1.Deployment{}
	case "RuntimeClass":
		obj = &nodev1.RuntimeClass{}
	default:
		t.Fatalf("%s #%d: unexpected kind %q", file, i, head.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		t.Fatalf("%s #%d (%s): %v", file, i, head.Kind, err)
	}
	switch o := obj.(type) {
	case *rbacv1.Role:
		checkRole(t, o)
	case *appsv1.Deployment:
		checkDeployment(t, o)
	case *nodev1.RuntimeClass:
		if o.Name != "gvisor" || o.Handler != "runsc" {
			t.Errorf("runtime class %s with handler %q: want gvisor -> runsc (the handler TestRealNode's containerd has)", o.Name, o.Handler)
		}
	}
	return head.Kind
}

func checkRole(t *testing.T, r *rbacv1.Role) {
	want := "create,delete,get,list,patch,watch"
	for _, rule := range r.Rules {
		verbs := append([]string(nil), rule.Verbs...)
		slices.Sort(verbs)
		if strings.Join(verbs, ",") != want || len(rule.Resources) != 1 || (rule.Resources[0] != "pods" && rule.Resources[0] != "services") {
			t.Errorf("role rule %+v", rule)
		}
	}
	if r.Namespace != "sage" || len(r.Rules) != 2 {
		t.Errorf("role %+v", r)
	}
}

func checkDeployment(t *testing.T, d *appsv1.Deployment) {
	spec := d.Spec.Template.Spec
	c := spec.Containers[0]
	if spec.ServiceAccountName != "sage-provisioner" || !*spec.SecurityContext.RunAsNonRoot || *c.SecurityContext.AllowPrivilegeEscalation {
		t.Errorf("deployment spec %+v", spec)
	}
	if c.ReadinessProbe.HTTPGet.Path != "/health" || c.Env[0].ValueFrom.SecretKeyRef == nil {
		t.Errorf("container %+v", c)
	}
	if strings.Join(c.Command, " ") != "/sage-provisioner" || c.Image != "sage-provisioner:dev" {
		t.Errorf("container runs %v from %s: want /sage-provisioner (deploy/kubernetes/Dockerfile's image)", c.Command, c.Image)
	}
	if !strings.Contains(strings.Join(c.Args, " "), "--backend=kubernetes") {
		t.Errorf("args %v", c.Args)
	}
}

func TestStrictDecodingCatchesTypos(t *testing.T) {
	doc := []byte("apiVersion: v1\nkind: Service\nmetadata:\n  name: x\nspec:\n  selectr: {a: b}\n")
	if err := yaml.UnmarshalStrict(doc, &corev1.Service{}); err == nil {
		t.Fatal("misspelt field accepted")
	}
}
