package opensandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sage-go/sage/internal/benchpair"
	"github.com/sage-go/sage/sagents/sandbox"
	"github.com/sage-go/sage/sagents/sandbox/providers/remote/opensandbox/opensandboxtest"
)

func benchSandbox(b *testing.B, c config) *osSandbox {
	s, err := open(context.Background(), c)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// bareTrue is the baseline: one POST /command of "true" that stops
// reading at the command's last event, as a client that knows execd's
// grace second would.
func bareTrue(ctx context.Context, e *ExecdClient) error {
	return e.runCommand(ctx, runCommandRequest{Command: "true"}, func(ev event) error {
		if ev.Type == eventComplete || ev.Type == eventFailed {
			return stopStream
		}
		return nil
	})
}

// BenchmarkOpenSandboxExecTrue times `exec true` through the provider
// and the bare execd call (bareTrue) alternately in one loop, against the
// fake execd with execd's grace second, and reports provider/bare as
// "x-baseline", the ratio of the medians (internal/benchpair; `make bench`
// wants it <= 1.2). With
// SAGE_OPENSANDBOX_EXECD_URL set it runs against that real execd.
func BenchmarkOpenSandboxExecTrue(b *testing.B) {
	srv := opensandboxtest.New(b)
	c := testConfig(srv)
	if url, token, tmp, work := benchReal(); url != "" {
		srv.ExecdAddr, srv.ExecdToken, srv.ExecdTmp = url, token, tmp
		c = testConfig(srv)
		c.Workspace = work
		// Close leaves a configured workspace (on a real server it goes
		// with the sandbox's container); on a shared execd remove it.
		b.Cleanup(func() {
			if err := NewExecdClient("http://"+url, token, nil, nil).RemoveDirs(context.Background(), work); err != nil {
				b.Errorf("removing the benchmark's workspace %s: %v", work, err)
			}
		})
	}
	s := benchSandbox(b, c)
	h := sandbox.NewFromDriver(sandbox.Config{Mode: sandbox.Remote}, &osDriver{osSandbox: s})
	ctx := context.Background()
	bare, provider := benchpair.Run(b, func() {
		if err := bareTrue(ctx, s.execdClient()); err != nil {
			b.Fatal(err)
		}
	}, func() {
		res, err := h.ExecuteCommand(ctx, "true", sandbox.ExecOptions{})
		if err != nil || !res.Success {
			b.Fatal(err, res)
		}
	})
	b.ReportMetric(float64(benchpair.Mean(provider).Microseconds()), "provider-µs/op")
	b.ReportMetric(float64(benchpair.Mean(bare).Microseconds()), "bare-µs/op")
}

// benchReal reads the real execd's variables (see realExecd); url is ""
// without them.
func benchReal() (url, token, tmp, work string) {
	url = os.Getenv(envExecdURL)
	if url == "" {
		return "", "", "", ""
	}
	tmp, work = os.Getenv(envExecdTmp), os.Getenv(envExecdWork)
	if tmp == "" {
		tmp = "/tmp"
	}
	if work == "" {
		work = "/tmp"
	}
	return strings.TrimPrefix(url, "http://"), os.Getenv(envExecdToken), tmp, filepath.Join(work, fmt.Sprintf("sage-bench-%d", time.Now().UnixNano()))
}
