package httpserve

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoopbackAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:80": true, "localhost:1": true, "[::1]:8080": true, "127.9.9.9:0": true,
		"0.0.0.0:8080": false, ":8080": false, "10.0.0.1:80": false, "example.com:80": false, "nonsense": false,
	} {
		assert.Equal(t, want, LoopbackAddr(addr), addr)
	}
}

// A request still running when the grace period ends gets its context
// cancelled; Serve returns and OnShutdown ran first.
func TestServeAnnouncesAndShutsDown(t *testing.T) {
	started := make(chan struct{})
	cancelled := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(started)
			<-r.Context().Done()
			close(cancelled)
			return
		}
		io.WriteString(w, "ok")
	})
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	var downFirst bool
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, h, Options{Name: "t", ServeOptions: ServeOptions{Listen: "127.0.0.1:0", Announce: pw,
			ShutdownGrace: 200 * time.Millisecond}, OnShutdown: func() { downFirst = true }})
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	require.NoError(t, err)
	url := strings.TrimSpace(strings.TrimPrefix(line, "listening "))
	resp, err := http.Get(url + "/")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "ok", string(body))
	go http.Get(url + "/slow")
	<-started
	cancel()
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the running request was never cancelled")
	}
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
	assert.True(t, downFirst)
}

func TestServeListenError(t *testing.T) {
	err := Serve(context.Background(), http.NotFoundHandler(), Options{Name: "t", ServeOptions: ServeOptions{Listen: "256.0.0.1:0"}})
	assert.ErrorContains(t, err, "t: listen")
}
