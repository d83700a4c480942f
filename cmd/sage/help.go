package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// newFlagSet returns the flag set of the command line name ("sage exec",
// "sage fs ls"), whose help starts with the synopsis lines. Parse it with
// parseFlags or parseFlagsInterspersed: parsing itself prints nothing.
func newFlagSet(name string, synopsis ...string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() { writeHelp(fs.Output(), fs, synopsis) }
	return fs
}

// parseFlags parses the flags before the first positional argument ("--"
// ends them too; fs.Args() holds the rest). stop reports that the command
// is over with code: 0 after -h or --help printed the help on stdout,
// exitUsage after a bad flag printed one line and a pointer to --help on
// stderr.
func parseFlags(env *cliEnv, fs *flag.FlagSet, args []string) (code int, stop bool) {
	_, code, stop = parseArgs(env, fs, args, false)
	return code, stop
}

// parseFlagsInterspersed is parseFlags for commands whose flags may come
// before, between or after the positional arguments, which it returns.
func parseFlagsInterspersed(env *cliEnv, fs *flag.FlagSet, args []string) (pos []string, code int, stop bool) {
	return parseArgs(env, fs, args, true)
}

func parseArgs(env *cliEnv, fs *flag.FlagSet, args []string, interspersed bool) ([]string, int, bool) {
	help := fs.Usage
	fs.Usage = func() {} // the flag package calls it on errors too
	fs.SetOutput(io.Discard)
	restore := explainValues(fs)
	var pos []string
	var err error
	if interspersed {
		pos, err = parseInterspersed(fs, args)
	} else if err = fs.Parse(args); err == nil {
		pos = fs.Args()
	}
	restore()
	fs.Usage = help
	switch {
	case err == nil:
		return pos, 0, false
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(env.stdout)
		fs.Usage()
		return nil, 0, true
	}
	return nil, usageError(env, fs.Name(), "%s", flagError(err)), true
}

// explainValues makes the flag package's duration and number flags say
// what they want instead of "parse error" while fs is parsed; restore
// puts the flag package's values back (the help names their kinds).
func explainValues(fs *flag.FlagSet) (restore func()) {
	var undo []func()
	fs.VisitAll(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok {
			return
		}
		var want func(s string) string
		switch g.Get().(type) {
		case time.Duration:
			want = wantDuration
		case int, int64, uint, uint64:
			want = func(string) string { return "want a whole number" }
		case float64:
			want = func(string) string { return "want a number" }
		default:
			return
		}
		v := f.Value
		f.Value = explained{v, want}
		undo = append(undo, func() { f.Value = v })
	})
	return func() {
		for _, u := range undo {
			u()
		}
	}
}

// explained is a flag value whose Set errors say what it wants.
type explained struct {
	flag.Value
	want func(s string) string
}

func (e explained) Set(s string) error {
	if err := e.Value.Set(s); err != nil {
		return errors.New(e.want(s))
	}
	return nil
}

// wantDuration says what a duration flag wants; a bare number gets the
// unit it lacks.
func wantDuration(s string) string {
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return fmt.Sprintf("want a duration with its unit, such as %ss or %sm", s, s)
	}
	return "want a duration such as 30s, 5m or 1h30m"
}

// flagError rewords the flag package's errors with the spelling the help
// uses: --name, and -x for one-letter names.
func flagError(err error) string {
	s := err.Error()
	if name, ok := strings.CutPrefix(s, "flag provided but not defined: -"); ok {
		return "unknown flag " + dashed(name)
	}
	if name, ok := strings.CutPrefix(s, "flag needs an argument: -"); ok {
		return "flag " + dashed(name) + " needs a value"
	}
	for _, sep := range []string{" for flag -", " for -"} {
		if before, after, ok := strings.Cut(s, sep); ok {
			name, rest, _ := strings.Cut(after, ":")
			return before + " for " + dashed(name) + ":" + rest
		}
	}
	return s
}

func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// writeHelp prints the usage lines, the command's summary and its flags.
func writeHelp(w io.Writer, fs *flag.FlagSet, synopsis []string) {
	for i, s := range synopsis {
		prefix := "usage: "
		if i > 0 {
			prefix = "       "
		}
		fmt.Fprintln(w, prefix+s)
	}
	if s := summaryOf(fs.Name()); s != "" {
		fmt.Fprintf(w, "\n%s\n", s)
	}
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		if n++; n == 1 {
			fmt.Fprintln(w, "\nflags:")
		}
		kind, text := flag.UnquoteUsage(f)
		line := "  " + dashed(f.Name)
		if kind != "" {
			line += " " + kind
		}
		// A default the usage already names (often "$VAR", which may
		// hold a secret) is not printed.
		if !strings.Contains(text, "(default") && !zeroDefault(f) {
			text += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "%s\n      %s\n", line, strings.ReplaceAll(text, "\n", "\n      "))
	})
}

// zeroDefault reports whether f's default is its type's zero value, as
// the flag package decides it.
func zeroDefault(f *flag.Flag) (zero bool) {
	defer func() {
		if recover() != nil {
			zero = f.DefValue == ""
		}
	}()
	t := reflect.TypeOf(f.Value)
	var z reflect.Value
	if t.Kind() == reflect.Pointer {
		z = reflect.New(t.Elem())
	} else {
		z = reflect.Zero(t)
	}
	return f.DefValue == z.Interface().(flag.Value).String()
}

// summaryOf finds the summary of a command line such as "sage fs ls" in
// the command table.
func summaryOf(name string) string {
	words := strings.Fields(name)
	if len(words) < 2 || words[0] != "sage" {
		return ""
	}
	e, ok := lookup(words[1])
	if !ok {
		return ""
	}
	if len(words) == 2 {
		return e.summary
	}
	for _, s := range e.subs {
		if s.name == words[2] {
			return s.summary
		}
	}
	return ""
}
