package doctor

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sage-go/sage/sagents/sandbox/providers/local"
)

const bwrapFix = "install bubblewrap: apt-get install bubblewrap (Debian/Ubuntu), dnf install bubblewrap (Fedora), apk add bubblewrap (Alpine)"

func checkBwrap(ctx context.Context, e Env) Check {
	c := Check{Name: "bwrap", Required: e.GOOS == "linux", Fix: bwrapFix}
	if e.GOOS != "linux" {
		c.Status, c.Detail = NA, "Linux only"
		return c
	}
	p, err := e.LookPath("bwrap")
	if err != nil {
		c.Status, c.Detail = Missing, "bwrap not found on PATH"
		return c
	}
	out, err := e.Output(ctx, p, "--version")
	if err != nil {
		c.Status, c.Detail = Missing, fmt.Sprintf("%s --version failed: %v", p, err)
		return c
	}
	c.Status, c.Detail = OK, p+" ("+strings.TrimSpace(string(out))+")"
	return c
}

// checkUserNS reads the sysctls and, when bwrap exists, proves that it can
// create the namespaces local mode uses.
func checkUserNS(ctx context.Context, e Env) Check {
	c := Check{Name: "user namespaces", Required: e.GOOS == "linux"}
	if e.GOOS != "linux" {
		c.Status, c.Detail = NA, "Linux only"
		return c
	}
	if v, err := e.read(e.ProcRoot, "sys/user/max_user_namespaces"); err == nil && v == "0" {
		c.Status, c.Detail = Missing, "user.max_user_namespaces is 0"
		c.Fix = "sysctl -w user.max_user_namespaces=15000 (and persist it in /etc/sysctl.d)"
		return c
	}
	if v, err := e.read(e.ProcRoot, "sys/kernel/unprivileged_userns_clone"); err == nil && v == "0" && os.Geteuid() != 0 {
		c.Status, c.Detail = Missing, "kernel.unprivileged_userns_clone is 0"
		c.Fix = "sysctl -w kernel.unprivileged_userns_clone=1"
		return c
	}
	p, err := e.LookPath("bwrap")
	if err != nil {
		c.Status, c.Detail, c.Fix = Warn, "sysctls allow them; not tried (bwrap missing)", bwrapFix
		return c
	}
	out, err := e.Output(ctx, p, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true")
	if err != nil {
		c.Status, c.Detail = Missing, "bwrap cannot create namespaces: "+firstLine(string(out), err)
		c.Fix = "allow unprivileged user namespaces (sysctl user.max_user_namespaces, kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu 24.04+), or run in a container with --security-opt seccomp=unconfined only if you accept that"
		return c
	}
	c.Status, c.Detail = OK, "bwrap --unshare-all works"
	return c
}

func firstLine(out string, err error) string {
	if s := strings.TrimSpace(out); s != "" {
		return strings.SplitN(s, "\n", 2)[0]
	}
	return err.Error()
}

func checkAppArmor(_ context.Context, e Env) Check {
	c := Check{Name: "apparmor userns", Required: false}
	if e.GOOS != "linux" {
		c.Status, c.Detail = NA, "Linux only"
		return c
	}
	v, err := e.read(e.ProcRoot, "sys/kernel/apparmor_restrict_unprivileged_userns")
	switch {
	case err != nil:
		c.Status, c.Detail = OK, "no AppArmor user-namespace restriction"
	case v == "1":
		c.Status, c.Detail = Warn, "kernel.apparmor_restrict_unprivileged_userns=1: unprivileged bwrap may be denied"
		c.Fix = "add an AppArmor profile that allows userns for /usr/bin/bwrap, or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"
	default:
		c.Status, c.Detail = OK, "kernel.apparmor_restrict_unprivileged_userns="+v
	}
	return c
}

func checkCgroup(_ context.Context, e Env) Check {
	c := Check{Name: "cgroups", Required: e.GOOS == "linux" && os.Geteuid() == 0}
	if e.GOOS != "linux" {
		c.Status, c.Detail = NA, "Linux only"
		return c
	}
	self, _ := e.read(e.ProcRoot, "self/cgroup")
	if ctrls, err := e.read(e.SysRoot, "fs/cgroup/cgroup.controllers"); err == nil {
		rel := v2Path(self)
		if writable(filepath.Join(e.SysRoot, "fs/cgroup", rel)) {
			c.Status, c.Detail = OK, fmt.Sprintf("cgroup v2 %s writable (controllers: %s): pids and memory limits use it", rel, ctrls)
			return c
		}
	} else if v1 := v1Writable(e, self); len(v1) > 0 {
		c.Status, c.Detail = OK, "cgroup v1 writable for "+strings.Join(v1, ", ")+": local mode limits use it"
		return c
	}
	c.Status, c.Detail = Warn, "no writable cgroup: memory limits fall back to RLIMIT_AS"
	c.Fix = "run under a delegated cgroup (systemd-run --user --scope -p Delegate=yes sage ...)"
	if c.Required {
		c.Status, c.Detail = Missing, "running as root without a writable cgroup: the kernel ignores RLIMIT_NPROC for root, so local mode refuses a pids limit"
		c.Fix = "run as an unprivileged user, give sage a writable cgroup, or set pids_limit: -1"
	}
	return c
}

func v2Path(self string) string {
	for _, line := range strings.Split(self, "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			return rest
		}
	}
	return "/"
}

// v1Writable lists the v1 controllers (pids, memory) whose cgroup of this
// process is writable.
func v1Writable(e Env, self string) []string {
	var out []string
	for _, line := range strings.Split(self, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			if (ctl == "pids" || ctl == "memory") && writable(filepath.Join(e.SysRoot, "fs/cgroup", ctl, parts[2])) {
				out = append(out, ctl)
			}
		}
	}
	return out
}

func writable(dir string) bool { return unix.Access(dir, unix.W_OK) == nil }

func checkSeatbelt(_ context.Context, e Env) Check {
	c := Check{Name: "seatbelt", Required: e.GOOS == "darwin"}
	if e.GOOS != "darwin" {
		c.Status, c.Detail = NA, "macOS only"
		return c
	}
	// Limits on macOS are ulimits; say which one is not what it seems.
	if _, err := os.Stat("/usr/bin/sandbox-exec"); err != nil {
		c.Status, c.Detail, c.Fix = Missing, "/usr/bin/sandbox-exec not found; "+local.SeatbeltLimitsNote, "use a macOS release that ships sandbox-exec"
		return c
	}
	c.Status, c.Detail = OK, "/usr/bin/sandbox-exec; "+local.SeatbeltLimitsNote
	return c
}

func checkDocker(ctx context.Context, e Env) Check {
	c := Check{Name: "docker", Fix: "start the Docker daemon (systemctl start docker) or set DOCKER_HOST; needed by remote mode's Docker backend"}
	client, base, err := dockerClient(e.DockerHost)
	if err != nil {
		c.Status, c.Detail = Missing, err.Error()
		return c
	}
	ctx, cancel := context.WithTimeout(ctx, e.Timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/_ping", nil)
	resp, err := client.Do(req)
	if err != nil {
		c.Status, c.Detail = Missing, "no daemon at "+e.DockerHost+": "+err.Error()
		return c
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		c.Status, c.Detail = Missing, fmt.Sprintf("%s answered %s", e.DockerHost, resp.Status)
		return c
	}
	c.Status, c.Detail = OK, "daemon at "+e.DockerHost+" (API "+resp.Header.Get("Api-Version")+")"
	return c
}

func dockerClient(host string) (*http.Client, string, error) {
	u, err := url.Parse(host)
	if err != nil {
		return nil, "", fmt.Errorf("DOCKER_HOST %q: %w", host, err)
	}
	switch u.Scheme {
	case "unix":
		tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", u.Path)
		}}
		return &http.Client{Transport: tr}, "http://docker", nil
	case "tcp", "http":
		return &http.Client{}, "http://" + u.Host, nil
	}
	return nil, "", fmt.Errorf("DOCKER_HOST %q: unsupported scheme %q", host, u.Scheme)
}

func checkRedis(ctx context.Context, e Env) Check {
	c := Check{Name: "redis", Fix: "apt-get install redis-server && redis-server --bind 127.0.0.1 --daemonize yes; needed by the redis state store"}
	ctx, cancel := context.WithTimeout(ctx, e.Timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", e.RedisAddr)
	if err != nil {
		c.Status, c.Detail = Missing, "no Redis at "+e.RedisAddr
		return c
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	fmt.Fprint(conn, "PING\r\n")
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "+PONG") {
		c.Status, c.Detail = Warn, fmt.Sprintf("%s accepts connections but did not answer PING (%q)", e.RedisAddr, strings.TrimSpace(line))
		return c
	}
	c.Status, c.Detail = OK, "PONG from "+e.RedisAddr
	return c
}

func checkOTLP(ctx context.Context, e Env) Check {
	c := Check{Name: "otlp endpoint", Fix: "start a collector, or Jaeger: build it once with `make jaeger` (it prints the binary's path, ~/.cache/sage/jaeger-v1.76.0), run that binary with no flags (OTLP on :4317, query API on :16686), then set OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317; without one, traces go to the console handler"}
	u, err := url.Parse(e.OTLPEndpoint)
	host := e.OTLPEndpoint
	if err == nil && u.Host != "" {
		host = u.Host
	}
	ctx, cancel := context.WithTimeout(ctx, e.Timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		c.Status, c.Detail = Missing, "nothing listens at "+e.OTLPEndpoint
		return c
	}
	conn.Close()
	c.Status, c.Detail = OK, "listening at "+e.OTLPEndpoint
	return c
}
