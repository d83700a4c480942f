package orchestrator

import (
	"fmt"
	"os"
	"strings"
)

// MissingEnvError is returned by ProviderFromConfig for a variable that is unset
// and has no default.
type MissingEnvError struct{ Key, Var string }

func (e *MissingEnvError) Error() string {
	return fmt.Sprintf("aio: environment %s: variable $%s is not set (give a default with ${%s:-default})", e.Key, e.Var, e.Var)
}

// resolveEnv expands $VAR, ${VAR} and ${VAR:-default} in the values of
// env, looking variables up with lookup (nil: os.LookupEnv). A variable
// that is unset and has no default is an error, not an empty string.
// "$$" is a literal "$".
func resolveEnv(env map[string]string, lookup func(string) (string, bool)) (map[string]string, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	out := make(map[string]string, len(env))
	for k, v := range env {
		r, err := expand(v, lookup)
		if err != nil {
			return nil, &MissingEnvError{Key: k, Var: err.Error()}
		}
		out[k] = r
	}
	return out, nil
}

// missingVar names the unresolved variable.
type missingVar string

func (m missingVar) Error() string { return string(m) }

func expand(s string, lookup func(string) (string, bool)) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		name, def, hasDef, n := parseRef(s[i+1:])
		if n == 0 {
			if s[i+1] == '$' {
				i++
			}
			b.WriteByte('$')
			continue
		}
		v, ok := lookup(name)
		switch {
		case ok && (v != "" || !hasDef):
			b.WriteString(v)
		case hasDef:
			b.WriteString(def)
		default:
			return "", missingVar(name)
		}
		i += n
	}
	return b.String(), nil
}

// parseRef parses what follows a '$': NAME or {NAME} or {NAME:-def}. n is
// the number of bytes consumed (0: not a reference).
func parseRef(s string) (name, def string, hasDef bool, n int) {
	if strings.HasPrefix(s, "{") {
		end := strings.IndexByte(s, '}')
		if end < 0 {
			return "", "", false, 0
		}
		body := s[1:end]
		name, def, hasDef = strings.Cut(body, ":-")
		if !isName(name) {
			return "", "", false, 0
		}
		return name, def, hasDef, end + 1
	}
	for n < len(s) && isNameByte(s[n], n == 0) {
		n++
	}
	return s[:n], "", false, n
}

func isName(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isNameByte(s[i], i == 0) {
			return false
		}
	}
	return s != ""
}

func isNameByte(c byte, first bool) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9')
}
