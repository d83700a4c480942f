package kube

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// manifestNamespace and manifestAccount are what deploy/kubernetes
// declares.
const (
	manifestNamespace = "sage"
	manifestAccount   = "sage-provisioner"
)

// applyManifests server-side applies every document of deploy/kubernetes
// with strict field validation (the API server refuses unknown and
// duplicate fields), as `kubectl apply --server-side` does, and returns
// the applied objects' kinds and names.
func applyManifests(t testing.TB, cp *controlPlane) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(manifestDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", manifestDir, err)
	}
	// The namespace first: the other documents live in it.
	for i, f := range files {
		if filepath.Base(f) == "namespace.yaml" {
			files[0], files[i] = files[i], files[0]
		}
	}
	var applied []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(data, []byte("\n---\n")) {
			obj, err := applyDoc(context.Background(), cp, doc)
			if err != nil {
				t.Fatalf("%s #%d: server-side apply: %v", filepath.Base(f), i, err)
			}
			applied = append(applied, obj.GetKind()+"/"+obj.GetName())
		}
	}
	return applied
}

// applyDoc server-side applies one YAML document, strictly validated.
func applyDoc(ctx context.Context, cp *controlPlane, doc []byte) (*unstructured.Unstructured, error) {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(js); err != nil {
		return nil, err
	}
	cfg := cp.config(cp.token)
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		return nil, err
	}
	gvk := obj.GroupVersionKind()
	mapping, err := restmapper.NewDiscoveryRESTMapper(groups).RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == "namespace" {
		ri = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	}
	return ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, js,
		metav1.PatchOptions{FieldManager: "sage-test", Force: ptr.To(true), FieldValidation: "Strict"})
}

// provisionerToken prepares the namespace as a controller manager would
// (its "default" ServiceAccount, which the ServiceAccount admission plugin
// looks up for every Pod) and returns a fresh token of the provisioner's
// ServiceAccount from the TokenRequest API.
func provisionerToken(t testing.TB, admin kubernetes.Interface) string {
	t.Helper()
	ctx := context.Background()
	_, err := admin.CoreV1().ServiceAccounts(manifestNamespace).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts(manifestNamespace).CreateToken(ctx, manifestAccount,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token request for %s/%s: %v", manifestNamespace, manifestAccount, err)
	}
	return tr.Status.Token
}

// testApplyRefusesUnknownFields is the control for applyManifests: a
// misspelt field fails server-side validation.
func testApplyRefusesUnknownFields(t *testing.T, cp *controlPlane) {
	doc := []byte(`apiVersion: v1
kind: ServiceAccount
metadata:
  name: sage-misspelt
  namespace: sage
automountServiceAcountToken: false
`)
	_, err := applyDoc(context.Background(), cp, doc)
	if err == nil || !strings.Contains(err.Error(), "automountServiceAcountToken") {
		t.Fatalf("apply of a misspelt field: err %v, want a strict-validation error naming it", err)
	}
}
