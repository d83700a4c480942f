package local

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestSeatbeltProfileGolden(t *testing.T) {
	cases := map[string]SeatbeltOptions{
		"basic": {Workspace: "/Users/me/.sage/sessions/s1/workspace", Tmp: "/Users/me/.sage/sessions/s1/runtime/tmp"},
		"mounts_network": {Workspace: "/w", Tmp: "/t", ReadWrite: []string{"/data/out"},
			ReadOnly: []string{"/data/in", "/opt/python3.12"}, Network: true},
		"allowlist": {Workspace: "/w", Tmp: "/t", ProxyPorts: []int{53128, 51080}},
		"escaping":  {Workspace: `/Users/me/my "quoted" dir`, Tmp: `/tmp/back\slash`, ReadOnly: []string{"/Users/me/ünï cødé ✓"}},
	}
	for name, o := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := SeatbeltProfile(o)
			require.NoError(t, err)
			golden := filepath.Join("testdata", "seatbelt", name+".sb")
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run go test -run Seatbelt -update to create the golden files")
			assert.Equal(t, string(want), got)
		})
	}
}

func TestSeatbeltRejectsBadPaths(t *testing.T) {
	for _, p := range []string{"relative", "/new\nline", "/nul\x00", ""} {
		_, err := SeatbeltProfile(SeatbeltOptions{Workspace: p, Tmp: "/t"})
		assert.Error(t, err, "%q", p)
	}
	_, err := SeatbeltProfile(SeatbeltOptions{Workspace: "/w", Tmp: "/t", ReadOnly: []string{"/x\"); (allow default) (\""}})
	assert.NoError(t, err, "quotes are escaped, not rejected")
}

func TestSeatbeltQuoting(t *testing.T) {
	q, err := sbString(`/a "b" \c`)
	require.NoError(t, err)
	assert.Equal(t, `"/a \"b\" \\c"`, q)
}
