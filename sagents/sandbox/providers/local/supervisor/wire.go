//go:build linux

package supervisor

import (
	"encoding/binary"
	"errors"
	"strconv"
)

// The control protocol's messages (one per SOCK_SEQPACKET record) are a
// list of fields, each a tag byte and a value: a number as a varint
// (encoding/binary's, zig-zag for signed ones, 1 for a flag) or a string
// as its length (an unsigned varint) and its bytes. A list of strings
// repeats its tag; a zero value is left out. Unlike encoding/json this
// takes no reflection: the first message a supervisor decodes costs it
// nothing more than the next, and a session's first command waits for
// that first decode.

// Field tags of a Request.
const (
	reqOp byte = 1 + iota
	reqID
	reqArgv
	reqEnv
	reqDir
	reqSig
	reqGate
	reqCPUSeconds
	reqPidfd
	reqGroupDies
	reqQuiet
)

// Field tags of a Reply.
const (
	repOp byte = 1 + iota
	repID
	repProtocol
	repPid
	repExit
	repSignal
	repErr
)

// ErrMessage is what decoding a malformed control message returns,
// wrapped with where it failed.
var ErrMessage = errors.New("supervisor: malformed control message")

// MarshalBinary encodes r for the control socket.
func (r Request) MarshalBinary() ([]byte, error) {
	if len(r.Argv) > MaxArgs || len(r.Env) > MaxArgs {
		return nil, errors.New("supervisor: a request holds at most " + strconv.Itoa(MaxArgs) + " arguments and as many variables")
	}
	var e encoder
	e.str(reqOp, r.Op)
	e.uint(reqID, r.ID)
	e.strs(reqArgv, r.Argv)
	e.strs(reqEnv, r.Env)
	e.str(reqDir, r.Dir)
	e.int(reqSig, r.Sig)
	e.flag(reqGate, r.Gate)
	e.int(reqCPUSeconds, r.CPUSeconds)
	e.flag(reqPidfd, r.Pidfd)
	e.flag(reqGroupDies, r.GroupDies)
	e.flag(reqQuiet, r.Quiet)
	if len(e) > MaxMessage {
		return nil, errors.New("supervisor: a request is at most " + strconv.Itoa(MaxMessage) + " bytes, this one " + strconv.Itoa(len(e)))
	}
	return e, nil
}

// UnmarshalBinary decodes a request encoded by MarshalBinary into r,
// which it resets first; an unknown field, a truncated value or more
// than MaxArgs arguments or variables is an error wrapping ErrMessage.
func (r *Request) UnmarshalBinary(b []byte) error {
	*r = Request{}
	d := decoder{b: b}
	for d.more() {
		switch tag := d.tag(); tag {
		case reqOp:
			r.Op = d.str()
		case reqID:
			r.ID = d.uint()
		case reqArgv:
			r.Argv = d.appendStr(r.Argv)
		case reqEnv:
			r.Env = d.appendStr(r.Env)
		case reqDir:
			r.Dir = d.str()
		case reqSig:
			r.Sig = d.int()
		case reqGate:
			r.Gate = d.flag()
		case reqCPUSeconds:
			r.CPUSeconds = d.int()
		case reqPidfd:
			r.Pidfd = d.flag()
		case reqGroupDies:
			r.GroupDies = d.flag()
		case reqQuiet:
			r.Quiet = d.flag()
		default:
			d.unknown(tag)
		}
	}
	return d.err
}

// MarshalBinary encodes r for the control socket (HostPid is not sent).
func (r Reply) MarshalBinary() ([]byte, error) {
	var e encoder
	e.str(repOp, r.Op)
	e.uint(repID, r.ID)
	e.int(repProtocol, r.Protocol)
	e.int(repPid, r.Pid)
	e.int(repExit, r.Exit)
	e.int(repSignal, r.Signal)
	e.str(repErr, r.Err)
	return e, nil
}

// UnmarshalBinary decodes a reply encoded by MarshalBinary into r, which
// it resets first; a malformed one is an error wrapping ErrMessage.
func (r *Reply) UnmarshalBinary(b []byte) error {
	*r = Reply{}
	d := decoder{b: b}
	for d.more() {
		switch tag := d.tag(); tag {
		case repOp:
			r.Op = d.str()
		case repID:
			r.ID = d.uint()
		case repProtocol:
			r.Protocol = d.int()
		case repPid:
			r.Pid = d.int()
		case repExit:
			r.Exit = d.int()
		case repSignal:
			r.Signal = d.int()
		case repErr:
			r.Err = d.str()
		default:
			d.unknown(tag)
		}
	}
	return d.err
}

type encoder []byte

func (e *encoder) str(tag byte, s string) {
	if s != "" {
		*e = append(binary.AppendUvarint(append(*e, tag), uint64(len(s))), s...)
	}
}

// strs encodes every element, empty ones too: a list keeps its length.
func (e *encoder) strs(tag byte, l []string) {
	for _, s := range l {
		*e = append(binary.AppendUvarint(append(*e, tag), uint64(len(s))), s...)
	}
}

func (e *encoder) uint(tag byte, v uint64) {
	if v != 0 {
		*e = binary.AppendUvarint(append(*e, tag), v)
	}
}

func (e *encoder) int(tag byte, v int) {
	if v != 0 {
		*e = binary.AppendVarint(append(*e, tag), int64(v))
	}
}

func (e *encoder) flag(tag byte, v bool) {
	if v {
		*e = append(*e, tag, 1)
	}
}

// decoder reads a message's fields in turn: more, the tag, then the
// value by the method of its type. The first error ends the message.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) more() bool { return d.err == nil && len(d.b) > 0 }

func (d *decoder) tag() byte {
	t := d.b[0]
	d.b = d.b[1:]
	return t
}

// messageError is a malformed message: what is wrong, wrapping ErrMessage.
type messageError string

func (e messageError) Error() string { return ErrMessage.Error() + ": " + string(e) }
func (e messageError) Unwrap() error { return ErrMessage }

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = messageError(what)
	}
	d.b = nil
}

func (d *decoder) unknown(tag byte) { d.fail("unknown field " + strconv.Itoa(int(tag))) }

func (d *decoder) uint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("truncated number")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int() int {
	v, n := binary.Varint(d.b)
	if n <= 0 || v != int64(int(v)) {
		d.fail("truncated or out of range number")
		return 0
	}
	d.b = d.b[n:]
	return int(v)
}

func (d *decoder) flag() bool { return d.uint() != 0 }

func (d *decoder) str() string {
	n := d.uint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.fail("string longer than the message")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) appendStr(l []string) []string {
	if len(l) >= MaxArgs {
		d.fail("a list of more than " + strconv.Itoa(MaxArgs) + " strings")
		return l
	}
	s := d.str()
	if d.err != nil {
		return l
	}
	return append(l, s)
}
