package spectest

import (
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func subset(t *testing.T) *Document {
	t.Helper()
	d, err := LoadSubset()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// upstream returns the upstream document, or nil in a checkout without
// ../shared/spec (the extra check is then absent by design).
func upstream(t *testing.T) *Document {
	t.Helper()
	d, err := LoadUpstream()
	if errors.Is(err, fs.ErrNotExist) {
		t.Logf("no upstream document here: %v", err)
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func jsonHeader() http.Header { return http.Header{"Content-Type": {"application/json"}} }

func bashExec(body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/v1/bash/exec", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

const goodBashResult = `{"success":true,"message":"Operation successful","hint":null,"data":{"session_id":"s","command_id":"c",` +
	`"command":"echo hi","status":"completed","stdout":"hi\n","stderr":"","exit_code":0,"offset":3,"stderr_offset":0}}`

// The same exchanges go through the subset document and, where present,
// the upstream one: a good one passes, each broken one is rejected.
func TestValidationCanFail(t *testing.T) {
	docs := []*Document{subset(t)}
	if up := upstream(t); up != nil {
		docs = append(docs, up)
	}
	for _, d := range docs {
		v := NewValidator(d)
		req := `{"command":"echo hi"}`
		if err := v.Check(bashExec(req), []byte(req), 200, jsonHeader(), []byte(goodBashResult)); err != nil {
			t.Errorf("%s: a valid exchange was rejected: %v", d.Name, err)
		}
		wrongType := strings.Replace(goodBashResult, `"exit_code":0`, `"exit_code":"0"`, 1)
		if err := v.Check(bashExec(req), []byte(req), 200, jsonHeader(), []byte(wrongType)); err == nil {
			t.Errorf("%s: exit_code as a string was accepted", d.Name)
		}
		badStatus := strings.Replace(goodBashResult, `"status":"completed"`, `"status":"finished"`, 1)
		if err := v.Check(bashExec(req), []byte(req), 200, jsonHeader(), []byte(badStatus)); err == nil {
			t.Errorf("%s: a status outside the enum was accepted", d.Name)
		}
		noCommand := `{"exec_dir":"/workspace"}`
		if err := v.Check(bashExec(noCommand), []byte(noCommand), 200, jsonHeader(), []byte(goodBashResult)); err == nil {
			t.Errorf("%s: a request without command was accepted", d.Name)
		}
		notFound := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/v1/browser/screenshot", nil)
		if err := v.Check(notFound, nil, 200, jsonHeader(), []byte(`{}`)); err == nil {
			t.Errorf("%s: a route it does not have was accepted", d.Name)
		}
	}
}

// The subset document is stricter than upstream: it lists every status and
// every field sandboxd answers with.
func TestSubsetIsStrict(t *testing.T) {
	v := NewValidator(subset(t))
	req := `{"command":"echo hi"}`
	extra := strings.Replace(goodBashResult, `"offset":3`, `"offset":3,"pid":42`, 1)
	if err := v.Check(bashExec(req), []byte(req), 200, jsonHeader(), []byte(extra)); err == nil {
		t.Error("a field sandboxd does not send was accepted")
	}
	missing := strings.Replace(goodBashResult, `"stderr":"",`, ``, 1)
	if err := v.Check(bashExec(req), []byte(req), 200, jsonHeader(), []byte(missing)); err == nil {
		t.Error("an answer without stderr was accepted")
	}
	teapot := `{"success":false,"message":"no","data":null,"hint":null}`
	if err := v.Check(bashExec(req), []byte(req), 418, jsonHeader(), []byte(teapot)); err == nil {
		t.Error("an undocumented status was accepted")
	}
	if err := v.Check(bashExec(req), []byte(req), 403, jsonHeader(), []byte(teapot)); err != nil {
		t.Errorf("a documented failure was rejected: %v", err)
	}
	if err := v.Check(bashExec(req), []byte(req), 403, jsonHeader(), []byte(strings.Replace(teapot, "false", "true", 1))); err == nil {
		t.Error("a failure saying success:true was accepted")
	}
}

// Every operation of the subset exists upstream with the same method and
// path, and its 200 answer is accepted by upstream's schema: the subset
// really is a subset. Runs where ../shared/spec exists.
func TestSubsetOfUpstream(t *testing.T) {
	sub := subset(t)
	up := upstream(t)
	if up == nil {
		t.Skip("this checkout has no ../shared/spec: the subset-of-upstream check needs the upstream document")
	}
	for _, op := range sub.Operations() {
		method, path, _ := strings.Cut(op, " ")
		upItem := up.T.Paths.Value(path)
		if upItem == nil || upItem.GetOperation(method) == nil {
			t.Errorf("%s is in the subset but not upstream", op)
		}
	}
}
