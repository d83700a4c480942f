package tools_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/tools"
)

func TestFileUpdate(t *testing.T) {
	const src = "a = 1\nb = 2\nc = 3\nb = 2\nend\n"
	cases := []struct {
		name, file, ops, code, want string
		wantMsg                     []string
	}{
		{name: "literal unique", file: "x = 1\ny = 2\n", ops: `[{"type":"replace","search":"y = 2","replace":"y = 20"}]`, want: "x = 1\ny = 20\n"},
		{name: "literal with regex metacharacters", file: "f(a[0])\n", ops: `[{"type":"replace","search":"f(a[0])","replace":"g()"}]`, want: "g()\n"},
		{name: "regex fallback with group", file: "version = 1.2.3\n", ops: `[{"type":"replace","search":"version = (\\d+)\\.\\d+\\.\\d+","replace":"version = ${1}.9.9"}]`, want: "version = 1.9.9\n"},
		{name: "ambiguous literal", file: src, ops: `[{"type":"replace","search":"b = 2","replace":"x"}]`, code: tools.CodeAmbiguousMatch, wantMsg: []string{"line 2: b = 2", "line 4: b = 2"}},
		{name: "ambiguous regex", file: src, ops: `[{"type":"replace","search":"^[abc] = \\d$","replace":"x"}]`, code: tools.CodeAmbiguousMatch, wantMsg: []string{"line 1", "line 2", "line 3"}},
		{name: "no match", file: src, ops: `[{"type":"replace","search":"zzz","replace":"x"}]`, code: tools.CodeNoMatch},
		{name: "no match, invalid regex", file: src, ops: `[{"type":"replace","search":"(zzz","replace":"x"}]`, code: tools.CodeNoMatch},
		{name: "empty search", file: src, ops: `[{"type":"replace","search":"","replace":"x"}]`, code: tools.CodeInvalidArguments},
		{name: "lines bottom-up refer to the original", file: "1\n2\n3\n4\n5\n",
			ops: `[{"type":"lines","start_line":2,"end_line":2,"content":"two\nTWO"},{"type":"lines","start_line":4,"end_line":5,"content":"four-five"}]`, want: "1\ntwo\nTWO\n3\nfour-five\n"},
		{name: "lines delete", file: "1\n2\n3\n", ops: `[{"type":"lines","start_line":2,"end_line":2,"content":""}]`, want: "1\n3\n"},
		{name: "lines insert", file: "1\n3\n", ops: `[{"type":"lines","start_line":2,"end_line":1,"content":"2"}]`, want: "1\n2\n3\n"},
		{name: "lines append at end", file: "1\n2", ops: `[{"type":"lines","start_line":3,"end_line":2,"content":"3\n"}]`, want: "1\n2\n3\n"},
		{name: "lines overlap", file: "1\n2\n3\n", ops: `[{"type":"lines","start_line":1,"end_line":2,"content":"x"},{"type":"lines","start_line":2,"end_line":3,"content":"y"}]`, code: tools.CodeInvalidArguments},
		{name: "lines past end", file: "1\n", ops: `[{"type":"lines","start_line":1,"end_line":5,"content":"x"}]`, code: tools.CodeInvalidArguments},
		{name: "lines then replace", file: "1\n2\n3\n", ops: `[{"type":"replace","search":"three","replace":"3!"},{"type":"lines","start_line":3,"end_line":3,"content":"three"}]`, want: "1\n2\n3!\n"},
		{name: "all or nothing", file: "x\ny\n", ops: `[{"type":"replace","search":"x","replace":"X"},{"type":"replace","search":"nope","replace":"z"}]`, code: tools.CodeNoMatch, want: "x\ny\n"},
		{name: "bad op type", file: "x\n", ops: `[{"type":"delete"}]`, code: tools.CodeInvalidArguments},
		{name: "no ops", file: "x\n", ops: `[]`, code: tools.CodeInvalidArguments},
		{name: "non-utf8 refused", file: "caf\xe9\n", ops: `[{"type":"replace","search":"caf","replace":"x"}]`, code: tools.CodeBinaryFile},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := open(t, sandbox.Passthrough)
			require.NoError(t, h.WriteFile(ctx(t), "f.txt", []byte(tc.file), sandbox.WriteOptions{}))
			m := manager(t, h, tools.Options{})
			args, _ := json.Marshal(map[string]any{"path": "f.txt", "operations": json.RawMessage(tc.ops)})
			text, err := m.Run(ctx(t), "file_update", args)
			if tc.code != "" {
				var te *tools.Error
				require.ErrorAs(t, err, &te, text)
				require.Equal(t, tc.code, te.Code, text)
				for _, w := range tc.wantMsg {
					require.Contains(t, te.Message, w)
				}
			} else {
				require.NoError(t, err, text)
			}
			got, err := h.ReadFile(ctx(t), "f.txt")
			require.NoError(t, err)
			want := tc.want
			if want == "" {
				want = tc.file // unchanged on error
			}
			require.Equal(t, want, string(got))
		})
	}
	t.Run("missing file", func(t *testing.T) {
		m := manager(t, open(t, sandbox.Passthrough), tools.Options{})
		_, err := m.Run(ctx(t), "file_update", json.RawMessage(`{"path":"nope","operations":[{"type":"replace","search":"a","replace":"b"}]}`))
		var te *tools.Error
		require.ErrorAs(t, err, &te)
		require.Equal(t, tools.CodeNotFound, te.Code)
	})
}
