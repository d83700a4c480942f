package llm

import (
	"bytes"
	"encoding/json"
	"image/png"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sage-go/sage/sagents/llm/llmtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// capableServer answers each probe as a capable model would.
func capableServer(r llmtest.Request) llmtest.Reply {
	body := string(r.Body)
	switch {
	case strings.Contains(body, `"response_format"`):
		return llmtest.Text(`{"ok"`, `: true}`)
	case strings.Contains(body, `"image_url"`):
		return llmtest.Chat("Red.")
	}
	return llmtest.Chat("pong")
}

func probeOpts(t *testing.T) ProbeOptions {
	return ProbeOptions{CacheDir: t.TempDir(), ConnectTimeout: 5 * time.Second, ProbeTimeout: 5 * time.Second}
}

func TestProbeCapableModel(t *testing.T) {
	srv := llmtest.New(t)
	srv.SetFallback(capableServer)
	c, _ := newClient(t, srv)
	rep, err := c.ProbeModel(ctxT(t), probeOpts(t))
	require.NoError(t, err)
	assert.Equal(t, Capabilities{StructuredOutput: Supported, Multimodal: Supported}, rep.Capabilities)
	assert.Equal(t, rep.Capabilities, c.Capabilities(Standard))
	require.Len(t, srv.Requests(), 3)
	var sawStream bool
	for _, r := range srv.Requests() {
		if strings.Contains(string(r.Body), `"response_format":{"type":"json_object"}`) {
			sawStream = strings.Contains(string(r.Body), `"stream":true`)
		}
	}
	assert.True(t, sawStream, "structured output is probed by streaming")
}

func TestProbeModelWithoutImagesOrJSON(t *testing.T) {
	srv := llmtest.New(t)
	srv.SetFallback(func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(string(r.Body), `"response_format"`) {
			return llmtest.Text("Sure! Here you go: ok")
		}
		return noImages(r)
	})
	c, _ := newClient(t, srv)
	rep, err := c.ProbeModel(ctxT(t), probeOpts(t))
	require.NoError(t, err)
	assert.Equal(t, Capabilities{StructuredOutput: Unsupported, Multimodal: Unsupported}, rep.Capabilities)
	assert.Len(t, srv.Requests(), 3, "probes are not adapted or retried")
}

func TestProbeTimeoutLeavesUnknown(t *testing.T) {
	srv := llmtest.New(t)
	srv.SetFallback(func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(string(r.Body), `"image_url"`) {
			return llmtest.Reply{Body: llmtest.ChatJSON("red"), HeaderDelay: 5 * time.Second}
		}
		return capableServer(r)
	})
	c, _ := newClient(t, srv)
	opts := probeOpts(t)
	opts.ProbeTimeout = 300 * time.Millisecond
	rep, err := c.ProbeModel(ctxT(t), opts)
	require.NoError(t, err)
	assert.Equal(t, Unknown, rep.Capabilities.Multimodal)
	assert.Equal(t, Supported, rep.Capabilities.StructuredOutput)
}

func TestProbeConnectionFailureIsError(t *testing.T) {
	srv := llmtest.New(t)
	srv.SetFallback(func(llmtest.Request) llmtest.Reply {
		return llmtest.Error(401, "invalid_request_error", "invalid_api_key", "", "Incorrect API key")
	})
	c, _ := newClient(t, srv)
	rep, err := c.ProbeModel(ctxT(t), probeOpts(t))
	require.ErrorIs(t, err, ErrAuth)
	assert.Len(t, srv.Requests(), 1, "optional probes do not run")
	assert.Equal(t, "authentication", rep.Probes[0].Failed, "the failure is named")
}

func TestProbeDiskCacheTTL(t *testing.T) {
	var n atomic.Int32
	srv := llmtest.New(t)
	srv.SetFallback(func(r llmtest.Request) llmtest.Reply { n.Add(1); return capableServer(r) })
	c, _ := newClient(t, srv)
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	opts := probeOpts(t)
	opts.Now = func() time.Time { return now }

	rep, err := c.ProbeModel(ctxT(t), opts)
	require.NoError(t, err)
	assert.False(t, rep.Cached)
	assert.EqualValues(t, 3, n.Load())

	c2, _ := newClient(t, srv)
	now = now.Add(time.Hour)
	rep, err = c2.ProbeModel(ctxT(t), opts)
	require.NoError(t, err)
	assert.True(t, rep.Cached)
	assert.EqualValues(t, 3, n.Load(), "served from the cache")
	assert.Equal(t, Supported, c2.Capabilities(Standard).Multimodal, "cached answers are applied")

	now = now.Add(24 * time.Hour)
	rep, err = c2.ProbeModel(ctxT(t), opts)
	require.NoError(t, err)
	assert.False(t, rep.Cached, "expired")
	assert.EqualValues(t, 6, n.Load())
}

func TestProbeCacheUnderSageHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("SAGE_HOME", home)
	dir, err := cacheDir(ProbeOptions{})
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(dir, home))
	assert.NotEqual(t, cacheKey("http://a/v1", "m"), cacheKey("http://b/v1", "m"))
	assert.NotEqual(t, cacheKey("http://a/v1", "m"), cacheKey("http://a/v1", "n"))
}

func TestProbeFunctionUsesSageHome(t *testing.T) {
	t.Setenv("SAGE_HOME", t.TempDir())
	srv := llmtest.New(t)
	srv.SetFallback(capableServer)
	c, _ := newClient(t, srv)
	caps, err := Probe(ctxT(t), c)
	require.NoError(t, err)
	assert.Equal(t, Supported, caps.StructuredOutput)
}

func TestRunProbeCommandTableAndJSON(t *testing.T) {
	srv := llmtest.New(t)
	srv.SetFallback(capableServer)
	o := ProbeCommandOptions{BaseURL: srv.URL, Model: "m", Probe: probeOpts(t)}
	var out bytes.Buffer
	require.NoError(t, RunProbeCommand(ctxT(t), &out, o))
	table := out.String()
	for _, s := range []string{"CAPABILITY", "connection", "structured_output", "multimodal", "supported", "tools", "not probed"} {
		assert.Contains(t, table, s)
	}
	assert.Regexp(t, `cache_control +unknown +- +provider table`, table, "a local server: no table entry")
	out.Reset()
	o.Model = "claude-sonnet-4-5"
	require.NoError(t, RunProbeCommand(ctxT(t), &out, o))
	assert.Regexp(t, `cache_control +supported +- +provider table`, out.String())
	assert.Regexp(t, `prompt_cache_key +unknown +- +provider table`, out.String())
	o.Model = "m"
	out.Reset()
	o.JSON = true
	require.NoError(t, RunProbeCommand(ctxT(t), &out, o))
	var rep ProbeReport
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	assert.True(t, rep.Cached)
	assert.Equal(t, Supported, rep.Capabilities.Multimodal)
	assert.Contains(t, out.String(), `"multimodal": "supported"`)
}

func TestRedPNG(t *testing.T) {
	img, err := png.Decode(bytes.NewReader(redPNG()))
	require.NoError(t, err)
	assert.Equal(t, 20, img.Bounds().Dx())
	r, g, b, _ := img.At(10, 10).RGBA()
	assert.Equal(t, []uint32{0xffff, 0, 0}, []uint32{r, g, b})
	assert.True(t, strings.HasPrefix(redPNGDataURL(), "data:image/png;base64,"))
}

func TestNewStartsFromFreshProbeCache(t *testing.T) {
	srv := llmtest.New(t)
	srv.SetFallback(capableServer)
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	opts := probeOpts(t)
	opts.Now = func() time.Time { return now }
	c, _ := newClient(t, srv)
	_, err := c.ProbeModel(ctxT(t), opts)
	require.NoError(t, err)
	probed := len(srv.Requests())

	fresh, _ := newClient(t, srv, func(cfg *Config) { cfg.ProbeCache = &opts })
	assert.Equal(t, Capabilities{StructuredOutput: Supported, Multimodal: Supported}, fresh.Capabilities(Standard))
	assert.Equal(t, probed, len(srv.Requests()), "New makes no network call")

	known, _ := newClient(t, srv, func(cfg *Config) {
		cfg.ProbeCache = &opts
		cfg.Standard.Capabilities = Capabilities{Multimodal: Unsupported}
	})
	assert.Equal(t, Capabilities{StructuredOutput: Supported, Multimodal: Unsupported}, known.Capabilities(Standard))

	later := opts
	later.Now = func() time.Time { return now.Add(25 * time.Hour) }
	stale, _ := newClient(t, srv, func(cfg *Config) { cfg.ProbeCache = &later })
	assert.Equal(t, Capabilities{}, stale.Capabilities(Standard), "a stale entry is ignored")

	refresh := opts
	refresh.Refresh = true
	reprobe, _ := newClient(t, srv, func(cfg *Config) { cfg.ProbeCache = &refresh })
	assert.Equal(t, Capabilities{}, reprobe.Capabilities(Standard), "Refresh (--reprobe) ignores the cache")

	plain, _ := newClient(t, srv)
	assert.Equal(t, Capabilities{}, plain.Capabilities(Standard), "without ProbeCache New reads nothing")
}

func TestProbeCommandConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	var out bytes.Buffer
	opts := probeOpts(t)
	err = RunProbeCommand(ctxT(t), &out, ProbeCommandOptions{BaseURL: "http://" + addr + "/v1", Model: "m", Probe: opts})
	require.ErrorIs(t, err, ErrConnection)
	assert.Regexp(t, `connection\s+failed \(refused\)`, out.String())
	assert.NotContains(t, out.String(), "unsupported\t")

	out.Reset()
	err = RunProbeCommand(ctxT(t), &out, ProbeCommandOptions{BaseURL: "http://" + addr + "/v1", Model: "m", JSON: true, Probe: opts})
	require.Error(t, err)
	var rep ProbeReport
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	assert.Equal(t, "refused", rep.Probes[0].Failed)
	assert.Equal(t, Unknown, rep.Probes[0].Result)
}

func TestProbeCommandNamesMissingFlags(t *testing.T) {
	var out bytes.Buffer
	err := RunProbeCommand(ctxT(t), &out, ProbeCommandOptions{BaseURL: "http://x/v1"})
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "--model", ce.Field)
	err = RunProbeCommand(ctxT(t), &out, ProbeCommandOptions{Model: "m"})
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "--base-url", ce.Field)
}
