package aioserver_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Item 7: client.file.replace_in_file(file, old_str, new_str) and
// client.file.search_in_file(file, regex).
func TestFileReplaceAndSearch_SDKFileCalls(t *testing.T) {
	f := newFixture(t, nil)
	p := filepath.Join(f.ws, "r.txt")
	require.NoError(t, os.WriteFile(p, []byte("a x\nb\nc x x\n"), 0o644))
	st, m := f.post("/v1/file/replace", `{"file":"`+p+`","old_str":"x","new_str":"yy"}`)
	require.Equal(t, http.StatusOK, st)
	assert.EqualValues(t, 3, data(t, m)["replaced_count"])
	b, _ := os.ReadFile(p)
	assert.Equal(t, "a yy\nb\nc yy yy\n", string(b))
	st, m = f.post("/v1/file/search", `{"file":"`+p+`","regex":"y+$"}`)
	require.Equal(t, http.StatusOK, st)
	d := data(t, m)
	assert.Equal(t, []any{"a yy", "c yy yy"}, d["matches"])
	assert.Equal(t, []any{1.0, 3.0}, d["line_numbers"])
	st, m = f.post("/v1/file/replace", `{"file":"nope.txt","old_str":"x","new_str":"y"}`)
	require.Equal(t, http.StatusOK, st)
	assert.Equal(t, false, m["success"])
	assert.Equal(t, "not_found", m["data"].(map[string]any)["error_type"])
	st, _ = f.post("/v1/file/search", `{"file":"`+p+`","regex":"("}`)
	assert.Equal(t, http.StatusUnprocessableEntity, st)
}

// Item 7: the text editor tool as the SDKs' str_replace_editor sends it.
func TestStrReplaceEditor_SDKEditorCalls(t *testing.T) {
	f := newFixture(t, nil)
	p := filepath.Join(f.ws, "e.py")
	edit := func(body string) map[string]any {
		t.Helper()
		st, m := f.post("/v1/file/str_replace_editor", body)
		require.Equal(t, http.StatusOK, st, "%v", m)
		return m
	}
	m := edit(`{"command":"create","path":"` + p + `","file_text":"a = 1\nb = 2\n"}`)
	assert.Equal(t, false, data(t, m)["prev_exist"])
	m = edit(`{"command":"create","path":"` + p + `","file_text":"x"}`)
	assert.Equal(t, false, m["success"], "create does not overwrite")
	m = edit(`{"command":"str_replace","path":"` + p + `","old_str":"b = 2","new_str":"b = 3"}`)
	assert.Equal(t, "a = 1\nb = 3\n", data(t, m)["new_content"])
	m = edit(`{"command":"insert","path":"` + p + `","insert_line":1,"new_str":"c = 4"}`)
	assert.Equal(t, "a = 1\nc = 4\nb = 3\n", data(t, m)["new_content"])
	m = edit(`{"command":"view","path":"` + p + `","view_range":[2,-1]}`)
	assert.Equal(t, "Here's the result of running `cat -n` on "+p+":\n     2\tc = 4\n     3\tb = 3\n", data(t, m)["output"])
	m = edit(`{"command":"str_replace","path":"` + p + `","old_str":" = ","new_str":"="}`)
	assert.Equal(t, false, m["success"], "an ambiguous old_str is refused")
	m = edit(`{"command":"str_replace","path":"` + p + `","old_str":" = ","new_str":"=","replace_mode":"ALL"}`)
	assert.Equal(t, "a=1\nc=4\nb=3\n", data(t, m)["new_content"])
	edit(`{"command":"undo_edit","path":"` + p + `"}`)
	edit(`{"command":"undo_edit","path":"` + p + `"}`)
	b, _ := os.ReadFile(p)
	assert.Equal(t, "a = 1\nb = 3\n", string(b), "two undos revert two edits")
	m = edit(`{"command":"view","path":"` + f.ws + `"}`)
	assert.Contains(t, data(t, m)["output"], p)
	m = edit(`{"command":"view","path":"/etc/passwd"}`)
	assert.Equal(t, "permission_denied", m["data"].(map[string]any)["error_type"])
	st, _ := f.doRaw(http.MethodPost, "/v1/file/str_replace_editor", `{"command":"rm","path":"`+p+`"}`)
	assert.Equal(t, http.StatusUnprocessableEntity, st)
}
