package aioapi_test

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/aioapi"
)

func TestProxyBypass(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://proxy.example:3128")
	t.Setenv("HTTPS_PROXY", "http://proxy.example:3128")
	t.Setenv("NO_PROXY", "")
	for host, direct := range map[string]bool{
		"127.0.0.1:8080": true, "[::1]:1": true, "localhost:80": true, "10.1.2.3": true,
		"192.168.0.7:9": true, "172.16.0.1": true, "169.254.1.1": true, "sandbox.example.com": false, "8.8.8.8": false,
	} {
		req := &http.Request{URL: &url.URL{Scheme: "http", Host: host}}
		p, err := aioapi.Proxy(req)
		require.NoError(t, err)
		if direct {
			assert.Nil(t, p, host)
		} else if assert.NotNil(t, p, host) {
			assert.Equal(t, "proxy.example:3128", p.Host)
		}
	}
}

func TestErrorsAreTyped(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/file/read": // the spec's documented style: 200, success:false, FileOperationError
			fmt.Fprint(w, `{"success":false,"message":"No such file","data":{"path":"/x","operation":"read","message":"No such file","error_type":"file_not_found","errno":2,"errno_name":"ENOENT"},"hint":"check the path"}`)
		case "/v1/file/list":
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"success":false,"message":"outside","data":null,"hint":null}`)
		case "/v1/file/find": // sandboxd's form since issue #13: 200 with a permission FileOperationError
			fmt.Fprint(w, `{"success":false,"message":"outside","data":{"path":"/","operation":"find","message":"outside","error_type":"permission_denied","retryable":false,"errno":null,"errno_name":null},"hint":null}`)
		case "/v1/file/grep": // the older form: an HTTP error with a FileOperationError
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"success":false,"message":"gone","data":{"path":"/g","operation":"grep","message":"gone","error_type":"not_found","retryable":false,"errno":2,"errno_name":"ENOENT"},"hint":null}`)
		case "/v1/file/write":
			w.WriteHeader(http.StatusUnprocessableEntity)
			fmt.Fprint(w, `{"detail":[{"loc":["body","file"],"msg":"Field required","type":"missing"}]}`)
		default:
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"detail":"boom"}`)
		}
	}))
	defer ts.Close()
	c, err := aioapi.NewClient(ts.URL, aioapi.ClientOptions{})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = c.ReadFile(ctx, aioapi.FileReadRequest{File: "/x"})
	var ae *aioapi.APIError
	require.ErrorAs(t, err, &ae)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.Equal(t, "check the path", ae.Hint)
	assert.Equal(t, http.StatusOK, ae.Status)
	_, err = c.ListFiles(ctx, aioapi.FileListRequest{Path: "/"})
	assert.ErrorIs(t, err, fs.ErrPermission)
	// Both forms of a file error are errors that match the fs sentinels.
	_, err = c.FindFiles(ctx, aioapi.FileFindRequest{Path: "/", Glob: "*"})
	assert.ErrorIs(t, err, fs.ErrPermission)
	assert.NotErrorIs(t, err, fs.ErrNotExist)
	_, err = c.GrepFiles(ctx, aioapi.FileGrepRequest{Path: "/g", Pattern: "x"})
	assert.ErrorIs(t, err, fs.ErrNotExist)
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, "grep", ae.File.Operation)
	_, err = c.WriteFile(ctx, aioapi.FileWriteRequest{})
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusUnprocessableEntity, ae.Status)
	assert.Contains(t, ae.Message, "body.file: Field required")
	_, err = c.BashExec(ctx, aioapi.BashExecRequest{Command: "x"})
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, "boom", ae.Message)
	assert.False(t, strings.HasPrefix(err.Error(), "Error:"))
}

func TestBearerTokenAndTimeoutFromContext(t *testing.T) {
	got := make(chan string, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Authorization")
		time.Sleep(2 * time.Second)
	}))
	defer ts.Close()
	c, err := aioapi.NewClient(ts.URL, aioapi.ClientOptions{Token: "t0k"})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = c.Sandbox(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, "Bearer t0k", <-got)
}
