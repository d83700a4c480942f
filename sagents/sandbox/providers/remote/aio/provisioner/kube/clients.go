package kube

import (
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

type (
	podClient     = typedcorev1.PodInterface
	serviceClient = typedcorev1.ServiceInterface
)
