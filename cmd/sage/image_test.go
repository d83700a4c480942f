package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sage-go/sage/sagents/sandbox/sandboxtest"
)

// Bad input to `sage image build` is a usage error naming the flag,
// before Docker is asked anything; --help lists --minimal.
func TestImageBuildFlags(t *testing.T) {
	home := sandboxtest.TempDir(t)
	r := sage(t, home, "", "image", "build", "--from", "bogus")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, `--from "bogus": want auto, dockerfile or debootstrap`)
	r = sage(t, home, "", "image", "build", "--help")
	assert.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "--minimal")
	assert.Contains(t, r.stdout, "debootstrap")
}
