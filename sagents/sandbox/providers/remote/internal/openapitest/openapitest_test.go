package openapitest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// doc is a one-operation document in the given OpenAPI version, the
// answer's field typed "integer or null" the way that version says it.
func doc(version, nullableInt string) string {
	return `openapi: ` + version + `
info: {title: t, version: "1"}
servers: [{url: "http://example.invalid:9"}]
paths:
  /v1/things/{id}:
    post:
      operationId: postThing
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      requestBody:
        required: true
        content:
          application/json:
            schema: {type: object, required: [name], additionalProperties: false, properties: {name: {type: string}}}
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema: {type: object, required: [n], properties: {n: ` + nullableInt + `}}
`
}

func post(body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:1234/v1/things/7", strings.NewReader("not read"))
	r.Header.Set("Content-Type", "application/json")
	return r
}

// Each check can fail: a good exchange passes, and a request without a
// required field, a path the document lacks, an undocumented status and
// an answer of the wrong type are each reported, in both versions.
func TestChecksCanFail(t *testing.T) {
	for _, c := range []struct{ version, nullableInt string }{
		{"3.0.3", "{type: integer, nullable: true}"},
		{"3.1.0", "{type: [integer, \"null\"]}"},
	} {
		d, err := Load("t.yaml", []byte(doc(c.version, c.nullableInt)))
		if err != nil {
			t.Fatalf("%s: %v", c.version, err)
		}
		if got := d.Operations(); len(got) != 1 || got[0] != "POST /v1/things/{id}" {
			t.Errorf("%s: operations %v", c.version, got)
		}
		js := http.Header{"Content-Type": {"application/json"}}
		in, err := d.CheckRequest(post(""), []byte(`{"name":"a"}`))
		if err != nil {
			t.Fatalf("%s: a valid request (to another host than the document's server) was rejected: %v", c.version, err)
		}
		for _, body := range []string{`{"n":1}`, `{"n":null}`} {
			if err := d.CheckResponse(in, 200, js, []byte(body)); err != nil {
				t.Errorf("%s: valid answer %s rejected: %v", c.version, body, err)
			}
		}
		if err := d.CheckResponse(in, 200, js, []byte(`{"n":"1"}`)); err == nil {
			t.Errorf("%s: an answer of the wrong type was accepted", c.version)
		}
		if err := d.CheckResponse(in, 404, js, []byte(`{}`)); err == nil {
			t.Errorf("%s: an undocumented status was accepted", c.version)
		}
		if in, err := d.CheckRequest(post(""), []byte(`{"nom":"a"}`)); err == nil || in == nil {
			t.Errorf("%s: a request without name was accepted (or not matched: %v)", c.version, in)
		}
		other := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/v1/other", nil)
		if in, err := d.CheckRequest(other, nil); err == nil || in != nil {
			t.Errorf("%s: a path the document lacks was matched", c.version)
		}
	}
	if _, err := Load("bad.yaml", []byte("openapi: 3.0.3\ninfo: {title: t}\npaths: {}\n")); err == nil {
		t.Error("a document without info.version loaded")
	}
}
