package main

// The sandbox providers this binary links; each registers its mode or
// remote provider by name in init.
import (
	_ "github.com/sage-go/sage/sagents/sandbox/providers/local"
	_ "github.com/sage-go/sage/sagents/sandbox/providers/passthrough"
	_ "github.com/sage-go/sage/sagents/sandbox/providers/remote"
	_ "github.com/sage-go/sage/sagents/sandbox/providers/remote/aio"
	_ "github.com/sage-go/sage/sagents/sandbox/providers/remote/opensandbox"
)
