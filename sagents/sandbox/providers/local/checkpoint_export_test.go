//go:build linux

package local

// SetMaxLayersForTest lowers the layer limit past which checkpoints merge;
// the returned func restores it.
func SetMaxLayersForTest(n int) func() {
	old := maxLayers
	maxLayers = n
	return func() { maxLayers = old }
}

// ForkSeedForTest is where Export leaves the /tmp of a fork into the
// folder ws (resolved).
func ForkSeedForTest(ws string) string { return forkSeed(ws) }

// LayersFreedForTest waits until the layers s dropped are removed and its
// spare layer is made (in the background).
func LayersFreedForTest(s *Sandbox) { s.ckpt.bg.Wait() }
