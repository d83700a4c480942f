package opensandbox

import (
	"bytes"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/sage-go/sage/sagents/sandbox/driver"
)

// How execd sends a command's output (runtime/command_common.go at
// upstream 4db3a993): the command writes to a file, which execd reads
// every 100 ms and sends one event per line with the line's end cut off.
// A line ends at "\n" or at "\r" (a "\r\n" pair ends one line), an empty
// line comes as the text "\n", a line still being written is held back
// until it ends, and a last line without an end is sent as it is when the
// command exits. The events therefore lose which end a line had and
// whether the last line had one, and as JSON strings they turn every byte
// that is not UTF-8 into U+FFFD. execd keeps the file itself, as
// <its TMPDIR>/<command id>.stdout and .stderr, and never removes it.

// lineStream rebuilds one stream (stdout or stderr) from its line events:
// every line gets a "\n" again, and the "\n" after a line is held back
// until the next event shows the line had an end. The rebuilt bytes go to
// the output buffer and the callback as they come; while they stay under
// keep bytes, they are also kept so that the exact bytes, read from
// execd's file afterwards, can be checked against them.
type lineStream struct {
	raw     bool // not line events: code output, taken as it comes
	out     *driver.BoundedBuffer
	on      func([]byte)
	held    bool         // a "\n" is owed to the last line
	kept    bytes.Buffer // the rebuilt bytes while under keep
	keep    int
	over    bool  // more than keep bytes, or a line lost to the event bound
	events  int   // line events seen
	written int64 // bytes handed on
}

func newLineStream(limit int, on func([]byte)) *lineStream {
	return &lineStream{out: driver.NewBoundedBuffer(limit), on: on, keep: limit}
}

func (l *lineStream) emit(p []byte) {
	l.out.Write(p)
	l.written += int64(len(p))
	if l.on != nil {
		l.on(p)
	}
	if !l.over {
		if l.kept.Len()+len(p) > l.keep {
			l.over = true
			l.kept = bytes.Buffer{}
		} else {
			l.kept.Write(p)
		}
	}
}

// event takes the text of one line event.
func (l *lineStream) event(text string) {
	l.events++
	if l.raw {
		l.emit([]byte(text))
		return
	}
	if l.held {
		l.held = false
		l.emit([]byte{'\n'})
	}
	if text == "\n" { // an empty line: its end is known
		l.emit([]byte{'\n'})
		return
	}
	l.emit([]byte(text))
	l.held = true
}

// lost records a line event of about size bytes that was over the event
// bound.
func (l *lineStream) lost(size int64) {
	l.events++
	l.over = true
	if l.held {
		l.held = false
		l.emit([]byte{'\n'})
	}
	l.out.Skip(size)
	l.written += size
	l.held = true
}

// finishLarge ends a stream that went over its limit (or lost a line)
// with the head and the tail of execd's file, read by byte ranges, and
// the size between them as dropped: the exact bytes where they are kept.
// read returns a range of the file and its size.
func (l *lineStream) finishLarge(read func(rng string, max int64) ([]byte, int64, error)) bool {
	headN := l.keep / 2
	tailN := l.keep - headN
	head, size, err := read("bytes=0-"+strconv.Itoa(max(headN-1, 0)), int64(headN))
	if err != nil || size < int64(len(head)) {
		return false
	}
	b := driver.NewBoundedBuffer(l.keep)
	b.Write(head)
	if rest := size - int64(len(head)); rest > 0 {
		tail, tsize, err := read("bytes=-"+strconv.Itoa(tailN), int64(tailN))
		if err != nil || tsize != size || int64(len(tail)) > rest {
			return false
		}
		b.Skip(rest - int64(len(tail)))
		b.Write(tail)
	}
	l.out, l.held = b, false
	return true
}

// finish ends the stream. With the exact bytes of execd's file (nil when
// they could not be read), the buffer gets them instead of the rebuilt
// ones when the file matches the events; otherwise the held "\n" is
// given (most output ends with one). The callback, which already had
// the rebuilt bytes, gets what the exact bytes add after them.
func (l *lineStream) finish(exact []byte) {
	if exact != nil && !l.over && matchesEvents(exact, l.kept.Bytes(), l.held) {
		rebuilt := l.kept.Bytes()
		if l.on != nil {
			switch {
			case bytes.HasPrefix(exact, rebuilt):
				if len(exact) > len(rebuilt) {
					l.on(exact[len(rebuilt):])
				}
			case l.held:
				l.on([]byte{'\n'})
			}
		}
		l.out = driver.NewBoundedBuffer(l.keep)
		l.out.Write(exact)
		l.held = false
		return
	}
	if l.held {
		l.held = false
		l.emit([]byte{'\n'})
	}
}

// matchesEvents says whether the file content b gives, framed as execd
// frames it, the events that rebuilt into rebuilt (held: the last line's
// "\n" was not given yet).
func matchesEvents(b, rebuilt []byte, held bool) bool {
	var want bytes.Buffer
	frameLines(b, func(line []byte) {
		if string(line) == "\n" {
			want.WriteByte('\n')
			return
		}
		want.Write(coerceUTF8(line))
		want.WriteByte('\n')
	})
	got := want.Bytes()
	if held {
		return bytes.Equal(got, append(rebuilt[:len(rebuilt):len(rebuilt)], '\n'))
	}
	return bytes.Equal(got, rebuilt)
}

// frameLines cuts b into the line events execd would send for it.
func frameLines(b []byte, emit func([]byte)) {
	cr := false
	start := 0
	for i, c := range b {
		if c != '\n' && c != '\r' {
			cr = false
			continue
		}
		switch {
		case i > start:
			emit(b[start:i])
		case c == '\n' && cr:
		default:
			emit([]byte{'\n'})
		}
		cr = c == '\r'
		start = i + 1
	}
	if start < len(b) {
		emit(b[start:])
	}
}

// coerceUTF8 replaces every byte that is not part of valid UTF-8 with
// U+FFFD, one for each byte, as encoding/json does when execd encodes an
// event.
func coerceUTF8(b []byte) []byte {
	if utf8.Valid(b) {
		return b
	}
	out := make([]byte, 0, len(b)+8)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, b[:n]...)
		}
		b = b[n:]
	}
	return out
}

// signalExit reads Go's description of a process killed by a signal,
// which execd reports with exit code -1 ("signal: killed", "signal:
// terminated (core dumped)", "signal: signal 34"), and returns the
// shell's exit code for it (128+n) and the signal's name.
func signalExit(text string) (code int, name string, ok bool) {
	desc, found := strings.CutPrefix(strings.TrimSpace(text), "signal: ")
	if !found {
		return 0, "", false
	}
	desc = strings.TrimSuffix(desc, " (core dumped)")
	n := 0
	if v, isNum := strings.CutPrefix(desc, "signal "); isNum {
		n, _ = strconv.Atoi(v)
	} else {
		for i := 1; i < 65; i++ {
			if syscall.Signal(i).String() == desc {
				n = i
				break
			}
		}
	}
	if n <= 0 || n > 64 {
		return 0, "", false
	}
	name = unix.SignalName(syscall.Signal(n))
	if name == "" {
		name = "SIG" + strconv.Itoa(n)
	}
	return 128 + n, name, true
}
