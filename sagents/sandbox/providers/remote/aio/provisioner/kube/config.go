package kube

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// serviceAccountNamespace is where in-cluster pods find their namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Connect returns a clientset: from kubeconfig when given (or
// $KUBECONFIG), else the in-cluster configuration, else ~/.kube/config.
func Connect(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "sage-provisioner"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube: client: %w", err)
	}
	return cs, nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" && os.Getenv("KUBECONFIG") == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			return cfg, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kube: no usable configuration (not in a cluster, and kubeconfig %q: %w)", firstNonEmpty(kubeconfig, os.Getenv("KUBECONFIG"), "~/.kube/config"), err)
	}
	return cfg, nil
}

// DefaultNamespace is the namespace the provisioner runs in when it runs
// in a cluster, else "default".
func DefaultNamespace() string {
	if b, err := os.ReadFile(serviceAccountNamespace); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return "default"
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
