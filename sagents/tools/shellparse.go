package tools

import "strings"

// simpleCommand is one command of a command line, its words after quote
// removal.
type simpleCommand struct {
	words []string
	// pipeTo says the command's output is piped into the next command.
	pipeTo bool
	// redirectDevice says output is redirected to /dev/sd*, /dev/nvme*, ...
	redirectDevice bool
}

// splitCommands splits a shell command line into simple commands at ;, &,
// &&, ||, |, newlines, and the insides of $( ), backquotes and ( ). It
// understands single and double quotes and backslashes. It is a
// best-effort lexer for policy checks, not a shell parser.
func splitCommands(line string) []simpleCommand {
	var (
		out      []simpleCommand
		cur      simpleCommand
		word     strings.Builder
		inW      bool
		redirect bool
	)
	endWord := func() {
		if !inW {
			return
		}
		w := word.String()
		word.Reset()
		inW = false
		if redirect {
			redirect = false
			if isDevice(w) {
				cur.redirectDevice = true
			}
			return
		}
		cur.words = append(cur.words, w)
	}
	endCmd := func(pipe bool) {
		endWord()
		cur.pipeTo = pipe
		if len(cur.words) > 0 || cur.redirectDevice {
			out = append(out, cur)
		}
		cur = simpleCommand{}
	}
	rs := []rune(line)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == '\\' && i+1 < len(rs):
			i++
			word.WriteRune(rs[i])
			inW = true
		case r == '\'':
			j := i + 1
			for j < len(rs) && rs[j] != '\'' {
				word.WriteRune(rs[j])
				j++
			}
			i, inW = j, true
		case r == '"':
			j := i + 1
			for j < len(rs) && rs[j] != '"' {
				if rs[j] == '\\' && j+1 < len(rs) {
					j++
				}
				if rs[j] == '$' && j+1 < len(rs) && rs[j+1] == '(' {
					break // a command substitution inside quotes: split there
				}
				word.WriteRune(rs[j])
				j++
			}
			if j < len(rs) && rs[j] == '$' {
				endCmd(false)
				i = j + 1
				continue
			}
			i, inW = j, true
		case r == ' ' || r == '\t':
			endWord()
		case r == '|':
			if i+1 < len(rs) && rs[i+1] == '|' {
				i++
				endCmd(false)
			} else {
				endCmd(true)
			}
		case r == ';' || r == '\n' || r == '&' || r == '(' || r == ')' || r == '`' || r == '{' || r == '}':
			if r == '&' && i+1 < len(rs) && rs[i+1] == '&' {
				i++
			}
			endCmd(false)
		case r == '$' && i+1 < len(rs) && rs[i+1] == '(':
			endCmd(false)
			i++
		case r == '>' || r == '<':
			endWord()
			for i+1 < len(rs) && (rs[i+1] == '>' || rs[i+1] == '&') {
				i++
			}
			redirect = r == '>'
		default:
			word.WriteRune(r)
			inW = true
		}
	}
	endCmd(false)
	return out
}

func isDevice(p string) bool {
	for _, d := range []string{"/dev/sd", "/dev/nvme", "/dev/hd", "/dev/vd", "/dev/xvd", "/dev/mmcblk", "/dev/disk"} {
		if strings.HasPrefix(p, d) {
			return true
		}
	}
	return false
}
