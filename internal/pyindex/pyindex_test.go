package pyindex

import (
	"archive/zip"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestServeWheel(t *testing.T) {
	name, whl, err := Wheel("sage-tiny", "0.1.0", "VALUE = 42\n")
	require.NoError(t, err)
	assert.Equal(t, "sage_tiny-0.1.0-py3-none-any.whl", name)
	zr, err := zip.NewReader(bytes.NewReader(whl), int64(len(whl)))
	require.NoError(t, err)
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	assert.ElementsMatch(t, []string{"sage_tiny/__init__.py", "sage_tiny-0.1.0.dist-info/METADATA",
		"sage_tiny-0.1.0.dist-info/WHEEL", "sage_tiny-0.1.0.dist-info/RECORD"}, names)

	s, err := Serve("127.0.0.1", map[string][]byte{name: whl})
	require.NoError(t, err)
	defer s.Close()
	code, body := get(t, s.URL)
	assert.Equal(t, 200, code)
	assert.Contains(t, body, `href="/simple/sage-tiny/"`)
	for _, spelling := range []string{"sage-tiny", "Sage_Tiny", "sage.tiny"} {
		code, body = get(t, s.URL+spelling+"/")
		assert.Equal(t, 200, code, spelling)
		assert.Contains(t, body, "/files/"+name+"#sha256=")
	}
	code, _ = get(t, s.URL+"other/")
	assert.Equal(t, 404, code)
	assert.Zero(t, s.Downloads())
	code, body = get(t, strings.TrimSuffix(s.URL, "simple/")+"files/"+name)
	assert.Equal(t, 200, code)
	assert.Equal(t, string(whl), body)
	assert.EqualValues(t, 1, s.Downloads())
}
