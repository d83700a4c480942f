package redisstore_test

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/redisstore"
)

// Issue 15, fault 4: a holder whose lock was taken by another (its TTL
// ran out while it stalled) must neither save nor remove, and learns it
// from its held context. The control writes under the same lock before
// it is lost.
func TestLostLockFencesWrites(t *testing.T) {
	prefix := "sage:test:fence:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	open(t, redisstore.Options{}) // fails clearly without redis
	s, err := redisstore.Open("redis://127.0.0.1:6379/0", redisstore.Options{Prefix: prefix, LockTTL: 300 * time.Millisecond})
	require.NoError(t, err)
	defer s.Close()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	t.Cleanup(func() { rdb.Del(context.Background(), prefix+"t", prefix+"t:lock") })
	ctx := context.Background()

	held, unlock, err := s.LockFenced(ctx, "t")
	require.NoError(t, err)
	defer unlock()
	require.NoError(t, s.Save(held, "t", orchestrator.SandboxInfo{SandboxID: "mine", URL: "http://a"}), "control: the holder writes")

	// Another process takes the lock (as after an expiry).
	require.NoError(t, rdb.Set(ctx, prefix+"t:lock", "someone-else", time.Minute).Err())
	err = s.Save(held, "t", orchestrator.SandboxInfo{SandboxID: "late", URL: "http://b"})
	require.ErrorIs(t, err, orchestrator.ErrLockLost)
	require.ErrorIs(t, s.Remove(held, "t"), orchestrator.ErrLockLost)
	got, ok, err := s.Load(ctx, "t")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "mine", got.SandboxID, "the late write went through")

	select {
	case <-held.Done():
		assert.ErrorIs(t, context.Cause(held), orchestrator.ErrLockLost)
	case <-time.After(2 * time.Second):
		t.Fatal("the held context was not cancelled after the lock was lost")
	}
	unlock()
	v, err := rdb.Get(ctx, prefix+"t:lock").Result()
	require.NoError(t, err)
	assert.Equal(t, "someone-else", v, "unlock deleted another holder's lock")
}

// A renewal that fails for a whole TTL (Redis unreachable) loses the lock.
func TestUnrenewableLockIsLost(t *testing.T) {
	srv := startRedisServer(t)
	s, err := redisstore.Open(srv, redisstore.Options{LockTTL: 300 * time.Millisecond})
	require.NoError(t, err)
	defer s.Close()
	held, unlock, err := s.LockFenced(context.Background(), "t")
	require.NoError(t, err)
	defer unlock()
	time.Sleep(400 * time.Millisecond)
	require.NoError(t, held.Err(), "control: a renewed lock holds past its TTL")
	stopRedisServer(t, srv)
	select {
	case <-held.Done():
		assert.ErrorIs(t, context.Cause(held), orchestrator.ErrLockLost)
	case <-time.After(3 * time.Second):
		t.Fatal("the lock was not reported lost")
	}
}

// startRedisServer runs a private redis-server on a free loopback port.
func startRedisServer(t *testing.T) string {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Missing(t, "redis-server not installed", testenv.SetupFix+" (.ci/setup.d/20-redis.sh installs it)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no")
	require.NoError(t, cmd.Start())
	servers.Store(port, cmd)
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 5*time.Second, 20*time.Millisecond)
	return "redis://127.0.0.1:" + port + "/0"
}

var servers sync.Map // port -> *exec.Cmd

func stopRedisServer(t *testing.T, url string) {
	port := strings.TrimSuffix(strings.TrimPrefix(url, "redis://127.0.0.1:"), "/0")
	v, ok := servers.Load(port)
	require.True(t, ok)
	cmd := v.(*exec.Cmd)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}
