// Package termsafe makes names and messages that come from inside a
// sandbox safe to print on a terminal: control characters, escape
// sequences, invalid UTF-8 and other non-printable characters are shown
// escaped, never sent raw.
package termsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Name quotes a file name the way `ls` does by default on a terminal
// (QUOTING_STYLE=shell-escape): a plain name is returned unchanged; a name
// with spaces or shell metacharacters is put in single quotes; control
// characters, invalid UTF-8 and other non-printable characters are written
// as $'\NNN' escapes (ESC[2J becomes $'\033' followed by '[2J'). The
// result is one line that a POSIX shell with $'...' (bash, zsh, ksh) reads back as the name.
func Name(s string) string {
	if s == "" {
		return "''"
	}
	plain, printable := true, true
	for i, w := 0, 0; i < len(s); i += w {
		r, n := utf8.DecodeRuneInString(s[i:])
		w = n
		switch {
		case !printableRune(r, n):
			plain, printable = false, false
		case needsQuote(r, i == 0):
			plain = false
		}
	}
	if plain {
		return s
	}
	if printable {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	var b strings.Builder
	inQuote, inEscape := false, false
	for i, w := 0, 0; i < len(s); i += w {
		r, n := utf8.DecodeRuneInString(s[i:])
		w = n
		if printableRune(r, n) {
			if inEscape {
				b.WriteByte('\'')
				inEscape = false
			}
			if r == '\'' {
				if inQuote {
					b.WriteByte('\'')
					inQuote = false
				}
				b.WriteString(`\'`)
				continue
			}
			if !inQuote {
				b.WriteByte('\'')
				inQuote = true
			}
			b.WriteString(s[i : i+n])
			continue
		}
		if inQuote {
			b.WriteByte('\'')
			inQuote = false
		}
		if !inEscape {
			b.WriteString("$'")
			inEscape = true
		}
		writeEscaped(&b, s[i:i+n])
	}
	if inQuote || inEscape {
		b.WriteByte('\'')
	}
	return b.String()
}

// Text escapes a message for a terminal: printable characters (and tabs)
// are kept, everything else (newlines included) becomes a C-style escape
// such as \n, \033 or \377, so the result is one line.
func Text(s string) string {
	clean := true
	for i, w := 0, 0; i < len(s); i += w {
		r, n := utf8.DecodeRuneInString(s[i:])
		w = n
		if r != '\t' && !printableRune(r, n) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i, w := 0, 0; i < len(s); i += w {
		r, n := utf8.DecodeRuneInString(s[i:])
		w = n
		if r == '\t' || printableRune(r, n) {
			b.WriteString(s[i : i+n])
			continue
		}
		writeEscaped(&b, s[i:i+n])
	}
	return b.String()
}

// printableRune reports whether r (n bytes long in the input) may be
// printed as is. A RuneError of width 1 is an invalid byte.
func printableRune(r rune, n int) bool {
	if r == utf8.RuneError && n <= 1 {
		return false
	}
	return unicode.IsPrint(r)
}

// needsQuote reports shell metacharacters (# and ~ only at the start).
func needsQuote(r rune, first bool) bool {
	switch r {
	case ' ', '!', '"', '$', '&', '\'', '(', ')', '*', ';', '<', '>', '?', '[', '\\', ']', '^', '`', '{', '|', '}':
		return true
	case '#', '~':
		return first
	}
	return false
}

// writeEscaped writes s, one character, as C writes it: \n, \t... for the
// control characters C names, else each byte in octal (\033).
func writeEscaped(b *strings.Builder, s string) {
	const controls, names = "\a\b\f\n\r\t\v", "abfnrtv"
	if len(s) == 1 {
		if i := strings.IndexByte(controls, s[0]); i >= 0 {
			b.WriteByte('\\')
			b.WriteByte(names[i])
			return
		}
	}
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(b, `\%03o`, s[i])
	}
}
