//go:build linux

package supervisor

import (
	"encoding"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestRequestRoundTrip(t *testing.T) {
	for _, req := range []Request{
		{},
		{Op: "ping", ID: 1},
		{Op: "exec", ID: 1<<64 - 1, Argv: []string{"/bin/sh", "-c", "echo 'a b'\n", ""}, Env: []string{"PATH=/bin", "E="},
			Dir: "/workspace", Gate: true, CPUSeconds: 3, Pidfd: true, GroupDies: true, Quiet: true},
		{Op: "signal", ID: 7, Sig: 9},
		{Op: "exec", Argv: []string{"\x00\xff", strings.Repeat("x", 300)}, Sig: -1, CPUSeconds: -5},
	} {
		b, err := req.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		got := Request{Op: "stale", Argv: []string{"stale"}}
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatalf("%+v: %v", req, err)
		}
		if !reflect.DeepEqual(got, req) {
			t.Errorf("round trip of %+v = %+v", req, got)
		}
	}
}

// The encoding of one request and one reply, byte for byte: a change to
// the fields' order or encoding must come with a new Protocol.
func TestWireBytes(t *testing.T) {
	b, _ := Request{Op: "exec", ID: 1, Argv: []string{"sh", ""}, Sig: -1, Quiet: true}.MarshalBinary()
	if want := "\x01\x04exec\x02\x01\x03\x02sh\x03\x00\x06\x01\x0b\x01"; string(b) != want {
		t.Errorf("request = %q, want %q", b, want)
	}
	b, _ = Reply{Op: "exited", ID: 2, Exit: 137, Signal: 9}.MarshalBinary()
	if want := "\x01\x06exited\x02\x02\x05\x92\x02\x06\x12"; string(b) != want {
		t.Errorf("reply = %q, want %q", b, want)
	}
}

func TestReplyRoundTrip(t *testing.T) {
	for _, r := range []Reply{
		{},
		{Op: "pong", ID: 3, Protocol: Protocol},
		{Op: "exited", ID: 4, Exit: -1},
		{Op: "exited", ID: 5, Exit: 137, Signal: 9},
		{Op: "started", ID: 6, Pid: 42, Err: "pidfd: ENOSYS"},
	} {
		b, err := r.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var got Reply
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
		if got != r {
			t.Errorf("round trip of %+v = %+v", r, got)
		}
	}
	// HostPid is the host's own: never sent.
	b, _ := Reply{Op: "started", HostPid: 99}.MarshalBinary()
	var got Reply
	if err := got.UnmarshalBinary(b); err != nil || got.HostPid != 0 {
		t.Errorf("HostPid travelled: %+v, %v", got, err)
	}
}

// Tags of Request fields (their place in Request.fields, from 1).
const (
	reqOp   = 1
	reqID   = 2
	reqArgv = 3
	reqSig  = 6
)

func TestRequestMalformed(t *testing.T) {
	ok, _ := Request{Op: "exec", ID: 300, Argv: []string{"true"}}.MarshalBinary()
	many := make([]byte, 0, 3*(MaxArgs+1))
	for range MaxArgs + 1 {
		many = append(many, reqArgv, 1, 'x')
	}
	for name, b := range map[string][]byte{
		"unknown field":      append(append([]byte{}, ok...), 99, 1),
		"field zero":         {0, 1},
		"truncated number":   {reqID, 0x80},
		"truncated string":   {reqOp, 5, 'e', 'x'},
		"truncated length":   {reqOp},
		"huge length":        {reqOp, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"number out of int":  {reqSig, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02},
		"too many arguments": many,
	} {
		var req Request
		if err := req.UnmarshalBinary(b); !errors.Is(err, ErrMessage) {
			t.Errorf("%s: err = %v, want ErrMessage", name, err)
		}
	}
	// Control: the message the malformed ones start from decodes.
	var req Request
	if err := req.UnmarshalBinary(ok); err != nil || req.ID != 300 || req.Argv[0] != "true" {
		t.Errorf("control: %+v, %v", req, err)
	}
	if _, err := (Request{Argv: make([]string, MaxArgs+1)}).MarshalBinary(); err == nil {
		t.Error("a request of more than MaxArgs arguments was encoded")
	}
	if _, err := (Request{Argv: []string{strings.Repeat("x", MaxMessage)}}).MarshalBinary(); err == nil {
		t.Error("a request larger than MaxMessage was encoded")
	}
}

// FuzzRequest: any message decodes without panic, and one that decodes
// encodes (at most MaxArgs arguments, MaxMessage bytes) back to the
// same request.
func FuzzRequest(f *testing.F) {
	fuzzRoundTrip(f, Request{Op: "ping", ID: 1},
		Request{Op: "exec", ID: 2, Argv: []string{"a", ""}, Env: []string{"X=1"}, Dir: "/", Gate: true, CPUSeconds: 2})
}

// FuzzReply is FuzzRequest for the supervisor's replies, what the host
// reads from inside the sandbox.
func FuzzReply(f *testing.F) {
	fuzzRoundTrip(f, Reply{Op: "pong", ID: 1, Protocol: Protocol}, Reply{Op: "exited", ID: 2, Exit: -1, Signal: 9, Err: "x"})
}

func fuzzRoundTrip[T any, PT interface {
	*T
	encoding.BinaryMarshaler
	encoding.BinaryUnmarshaler
}](f *testing.F, seeds ...T) {
	for _, m := range seeds {
		b, err := PT(&m).MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m T
		if PT(&m).UnmarshalBinary(b) != nil {
			return
		}
		out, err := PT(&m).MarshalBinary()
		if err != nil {
			t.Fatalf("%+v decoded, but does not encode: %v", m, err)
		}
		var again T
		if err := PT(&again).UnmarshalBinary(out); err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("%+v encoded as %q decodes as %+v, %v", m, out, again, err)
		}
	})
}
