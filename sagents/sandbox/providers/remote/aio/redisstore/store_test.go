package redisstore_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sage-go/sage/internal/testenv"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/orchestrator"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/aio/redisstore"
)

func open(t *testing.T, o redisstore.Options) *redisstore.Store {
	c, err := net.DialTimeout("tcp", "127.0.0.1:6379", time.Second)
	if err != nil {
		testenv.Missing(t, "redis on 127.0.0.1:6379 ("+err.Error()+")", testenv.SetupFix+" (.ci/setup.d/20-redis.sh starts it)")
	}
	c.Close()
	o.Prefix = "sage:test:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	s, err := redisstore.Open("redis://127.0.0.1:6379/0", o)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSaveLoadRemove(t *testing.T) {
	s := open(t, redisstore.Options{})
	ctx := context.Background()
	_, ok, err := s.Load(ctx, "t1")
	require.NoError(t, err)
	assert.False(t, ok)
	require.NoError(t, s.Save(ctx, "t1", orchestrator.SandboxInfo{SandboxID: "sid", URL: "http://x", CreatedAt: time.Now()}))
	info, ok, err := s.Load(ctx, "t1")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "sid", info.SandboxID)
	all, err := s.List(ctx)
	require.NoError(t, err)
	assert.Len(t, all, 1)
	require.NoError(t, s.Remove(ctx, "t1"))
	_, ok, _ = s.Load(ctx, "t1")
	assert.False(t, ok)
	_, _, err = s.Load(ctx, "bad id")
	assert.Error(t, err)
}

func TestLockExclusiveRenewedAndExpires(t *testing.T) {
	s := open(t, redisstore.Options{LockTTL: 300 * time.Millisecond})
	ctx := context.Background()
	unlock, err := s.Lock(ctx, "t")
	require.NoError(t, err)
	// Held past its TTL: renewal keeps it.
	cctx, cancel := context.WithTimeout(ctx, 700*time.Millisecond)
	defer cancel()
	_, err = s.Lock(cctx, "t")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	unlock()
	unlock2, err := s.Lock(ctx, "t")
	require.NoError(t, err)
	unlock2()
}

func TestUnreachable(t *testing.T) {
	s, err := redisstore.Open("redis://127.0.0.1:1/0", redisstore.Options{})
	require.NoError(t, err)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = s.Lock(ctx, "t")
	assert.ErrorContains(t, err, "redisstore: lock t")
	_, _, err = s.Load(ctx, "t")
	assert.Error(t, err)
}
