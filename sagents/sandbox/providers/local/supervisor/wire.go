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
// as its length (an unsigned varint) and its bytes. A field's tag is its
// place in the type's fields list, from 1. A list of strings repeats its
// tag; a zero value is left out. Unlike encoding/json this takes no
// reflection: the first message a supervisor decodes costs it nothing
// more than the next, and a session's first command waits for that
// first decode.

// ErrMessage is what decoding a malformed control message returns,
// wrapped with where it failed.
var ErrMessage = errors.New("supervisor: malformed control message")

// MarshalBinary encodes r for the control socket.
func (r Request) MarshalBinary() ([]byte, error) {
	if len(r.Argv) > MaxArgs || len(r.Env) > MaxArgs {
		return nil, errors.New("supervisor: a request holds at most " + strconv.Itoa(MaxArgs) + " arguments and as many variables")
	}
	b := encode(r.fields())
	if len(b) > MaxMessage {
		return nil, errors.New("supervisor: a request is at most " + strconv.Itoa(MaxMessage) + " bytes, this one " + strconv.Itoa(len(b)))
	}
	return b, nil
}

// UnmarshalBinary decodes a request encoded by MarshalBinary into r,
// which it resets first; an unknown field, a truncated value or more
// than MaxArgs arguments or variables is an error wrapping ErrMessage.
func (r *Request) UnmarshalBinary(b []byte) error {
	*r = Request{}
	return decode(b, r.fields())
}

// fields are r's fields by tag: fields()[tag-1] has that tag.
func (r *Request) fields() []field {
	return []field{{str: &r.Op}, {u64: &r.ID}, {strs: &r.Argv}, {strs: &r.Env}, {str: &r.Dir}, {num: &r.Sig},
		{flag: &r.Gate}, {num: &r.CPUSeconds}, {flag: &r.Pidfd}, {flag: &r.GroupDies}, {flag: &r.Quiet}}
}

// MarshalBinary encodes r for the control socket (HostPid is not sent).
func (r Reply) MarshalBinary() ([]byte, error) { return encode(r.fields()), nil }

// UnmarshalBinary decodes a reply encoded by MarshalBinary into r, which
// it resets first; a malformed one is an error wrapping ErrMessage.
func (r *Reply) UnmarshalBinary(b []byte) error {
	*r = Reply{}
	return decode(b, r.fields())
}

// fields are r's fields by tag, as Request.fields.
func (r *Reply) fields() []field {
	return []field{{str: &r.Op}, {u64: &r.ID}, {num: &r.Protocol}, {num: &r.Pid}, {num: &r.Exit}, {num: &r.Signal}, {str: &r.Err}}
}

// field is one field of a message: a pointer to its value, by type.
type field struct {
	str  *string
	strs *[]string
	u64  *uint64
	num  *int
	flag *bool
}

// encode writes every field that is not zero; a list's elements each.
func encode(fields []field) []byte {
	var e []byte
	for i, f := range fields {
		tag := byte(i + 1)
		switch {
		case f.str != nil && *f.str != "":
			e = appendString(append(e, tag), *f.str)
		case f.strs != nil:
			for _, s := range *f.strs { // empty ones too: a list keeps its length
				e = appendString(append(e, tag), s)
			}
		case f.u64 != nil && *f.u64 != 0:
			e = binary.AppendUvarint(append(e, tag), *f.u64)
		case f.num != nil && *f.num != 0:
			e = binary.AppendVarint(append(e, tag), int64(*f.num))
		case f.flag != nil && *f.flag:
			e = append(e, tag, 1)
		}
	}
	return e
}

func appendString(e []byte, s string) []byte {
	return append(binary.AppendUvarint(e, uint64(len(s))), s...)
}

// decode reads b's fields into fields until b ends or the first error.
func decode(b []byte, fields []field) error {
	d := decoder{b: b}
	for d.err == nil && len(d.b) > 0 {
		tag := d.b[0]
		d.b = d.b[1:]
		if tag == 0 || int(tag) > len(fields) {
			d.fail("unknown field " + strconv.Itoa(int(tag)))
			break
		}
		switch f := fields[tag-1]; {
		case f.str != nil:
			*f.str = d.str()
		case f.strs != nil:
			if len(*f.strs) >= MaxArgs {
				d.fail("a list of more than " + strconv.Itoa(MaxArgs) + " strings")
				break
			}
			if s := d.str(); d.err == nil {
				*f.strs = append(*f.strs, s)
			}
		case f.u64 != nil:
			*f.u64 = d.uint()
		case f.num != nil:
			*f.num = d.int()
		case f.flag != nil:
			*f.flag = d.uint() != 0
		}
	}
	return d.err
}

// decoder reads a message's values; the first error ends the message.
type decoder struct {
	b   []byte
	err error
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
