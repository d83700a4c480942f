package a

import "testing"

func TestOnly(t *testing.T) { _ = OnlyTested; Used{}.N() }
