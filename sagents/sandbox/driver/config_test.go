package driver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseMount(t *testing.T) {
	m, err := ParseMount("/h:/s:rw")
	require.NoError(t, err)
	assert.Equal(t, VolumeMount{"/h", "/s", false}, m)
	for _, bad := range []string{"", "/h", ":/s", "/h:", "/h:/s:rx", "/h:/s:ro:x"} {
		_, err := ParseMount(bad)
		assert.Error(t, err, bad)
	}
}

func TestCommandResultJSON(t *testing.T) {
	r := CommandResult{Success: true, Stdout: "x", ExitCode: 0, Duration: 1500 * time.Millisecond}
	b, err := r.MarshalJSON()
	require.NoError(t, err)
	assert.JSONEq(t, `{"success":true,"stdout":"x","stderr":"","exit_code":0,"duration_ms":1500,
		"timed_out":false,"truncated":false,"stdout_dropped_bytes":0,"stderr_dropped_bytes":0}`, string(b))
	var back CommandResult
	require.NoError(t, back.UnmarshalJSON(b))
	assert.Equal(t, r, back)
}
