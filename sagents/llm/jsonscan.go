package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// isNull reports whether the JSON value v is null. With the helpers below
// it scans stream chunks without building maps.
func isNull(v []byte) bool { return len(v) == 4 && string(v) == "null" }

// stringValue decodes a JSON string (null leaves dst unchanged).
func stringValue(v []byte, dst *string) error {
	if isNull(v) {
		return nil
	}
	if len(v) == 0 || v[0] != '"' {
		return errors.New("llm: expected a JSON string")
	}
	s, err := unquote(v)
	*dst = s
	return err
}

// unquote decodes a JSON string literal. Literals without escapes and with
// valid UTF-8 (nearly all) are sliced; the rest go through encoding/json.
func unquote(b []byte) (string, error) {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return "", errors.New("llm: malformed JSON string")
	}
	in := b[1 : len(b)-1]
	if bytes.IndexByte(in, '\\') < 0 && utf8.Valid(in) {
		for _, c := range in {
			if c < 0x20 || c == '"' {
				return "", errors.New("llm: malformed JSON string")
			}
		}
		return string(in), nil
	}
	var s string
	err := json.Unmarshal(b, &s)
	return s, err
}

// eachMember calls fn for each member of the JSON object b with its key
// (unescaped) and raw value. b comes from encoding/json and is valid, but the
// walk checks bounds anyway so that malformed input is an error, never a
// panic.
func eachMember(b []byte, fn func(key, val []byte) error) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		if i < len(b) && isNull(bytes.TrimSpace(b[i:])) {
			return nil
		}
		return errMalformed
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil
	}
	for i < len(b) {
		if b[i] != '"' {
			return errMalformed
		}
		end, err := skipString(b, i)
		if err != nil {
			return err
		}
		key := b[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 || !utf8.Valid(key) {
			k, err := unquote(b[i:end])
			if err != nil {
				return err
			}
			key = []byte(k)
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return errMalformed
		}
		i = skipSpace(b, i+1)
		vend, err := skipValue(b, i)
		if err != nil {
			return err
		}
		if err := fn(key, b[i:vend]); err != nil {
			return err
		}
		i = skipSpace(b, vend)
		if i >= len(b) {
			return errMalformed
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return nil
		default:
			return errMalformed
		}
	}
	return errMalformed
}

var errMalformed = errors.New("llm: malformed JSON object")

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string literal starting at b[i].
func skipString(b []byte, i int) (int, error) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, errMalformed
}

// skipValue returns the index after the value starting at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errMalformed
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, err := skipString(b, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errMalformed
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	if j == i {
		return 0, errMalformed
	}
	return j, nil
}
