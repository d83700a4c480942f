package netbridge

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Name is the argv[0] base name that makes a linking binary the bridge.
const Name = "sage-netbridge"

// ExitBridgeFailed is the exit status when the bridge itself fails
// (before the command runs); it says why on stderr.
const ExitBridgeFailed = 125

func init() {
	if filepath.Base(os.Args[0]) == Name {
		os.Exit(Main(os.Args[1:]))
	}
}

// Forward bridges 127.0.0.1:Port to the Unix socket Socket.
type Forward struct {
	Port   int
	Socket string
}

// String is the --forward value: PORT=SOCKET.
func (f Forward) String() string { return strconv.Itoa(f.Port) + "=" + f.Socket }

// Args is the bridge's argument list (without argv[0]) running argv;
// asBytes > 0 sets RLIMIT_AS on the command.
func Args(fwd []Forward, asBytes int64, argv []string) []string {
	var a []string
	for _, f := range fwd {
		a = append(a, "--forward", f.String())
	}
	if asBytes > 0 {
		a = append(a, "--as", strconv.FormatInt(asBytes, 10))
	}
	return append(append(a, "--"), argv...)
}

type forwards []Forward

func (f *forwards) String() string { return fmt.Sprint(*f) }

func (f *forwards) Set(s string) error {
	p, sock, ok := strings.Cut(s, "=")
	n, err := strconv.Atoi(p)
	if !ok || err != nil || n < 1 || n > 65535 || !filepath.IsAbs(sock) {
		return fmt.Errorf("want PORT=/abs/socket, got %q", s)
	}
	*f = append(*f, Forward{n, sock})
	return nil
}

// Main runs the bridge with args (without argv[0]) and returns the exit
// status: the command's, or ExitBridgeFailed.
func Main(args []string) int {
	fs := flag.NewFlagSet(Name, flag.ContinueOnError)
	var fwd forwards
	fs.Var(&fwd, "forward", "PORT=SOCKET: bridge 127.0.0.1:PORT to a Unix socket (repeatable)")
	as := fs.Int64("as", 0, "RLIMIT_AS of the command in bytes (0: inherit)")
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, Name+": usage: "+Name+" --forward PORT=SOCKET... [--as BYTES] -- CMD ARGS...")
		return ExitBridgeFailed
	}
	// Not dumpable: the command (same uid) cannot trace the bridge or
	// read its descriptors through /proc, among them, in a session
	// sandbox, the copy of the supervisor's control socket it passes on.
	// The command itself is dumpable again (execve resets it).
	if err := notDumpable(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", Name, err)
		return ExitBridgeFailed
	}
	for _, f := range fwd {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(f.Port)))
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", Name, err)
			return ExitBridgeFailed
		}
		go serve(ln, f.Socket)
	}
	return run(fs.Args(), *as)
}

// serve forwards every connection on ln to the socket.
func serve(ln net.Listener, socket string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go forward(c, socket)
	}
}

func forward(c net.Conn, socket string) {
	defer c.Close()
	u, err := net.Dial("unix", socket)
	if err != nil {
		return
	}
	defer u.Close()
	done := make(chan struct{})
	go func() { copyHalf(u, c); close(done) }()
	copyHalf(c, u)
	<-done
}

func copyHalf(dst, src net.Conn) {
	io.Copy(dst, src)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}

// run starts argv with the bridge's stdio, environment and process group
// and relays its exit status. Termination signals reach the command
// through the process group; the bridge notes and outlasts them so that
// it can report how the command ended.
func run(argv []string, as int64) int {
	if as > 0 {
		argv = append([]string{"/bin/sh", "-c", "ulimit -v " + strconv.FormatInt(as>>10, 10) + ` && exec "$@"`, "sage-limits"}, argv...)
	}
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", Name, err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return 127
		}
		return 126
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", Name, err)
		return ExitBridgeFailed
	}
	return 0
}
