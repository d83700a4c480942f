package tools

import (
	"context"
	"fmt"
	"os"
	"path"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sage-go/sage/internal/yamlstrict"
)

// Decision is what a [Policy] says about a command.
type Decision int

// Decisions, from least to most restrictive.
const (
	Allow Decision = iota
	Ask
	Deny
)

func (d Decision) String() string {
	switch d {
	case Allow:
		return "allow"
	case Ask:
		return "ask"
	case Deny:
		return "deny"
	}
	return fmt.Sprintf("Decision(%d)", int(d))
}

// UnmarshalText reads "allow", "ask" or "deny".
func (d *Decision) UnmarshalText(b []byte) error {
	switch strings.ToLower(string(b)) {
	case "allow":
		*d = Allow
	case "ask":
		*d = Ask
	case "deny":
		*d = Deny
	default:
		return fmt.Errorf("decision %q: want allow, ask or deny", b)
	}
	return nil
}

// Rule is a configured policy rule: a regular expression matched against
// each simple command of a command line (its words joined by single
// spaces, after quote removal) and, for rules with Whole set, against the
// whole command line.
type Rule struct {
	Name     string   `yaml:"name"`
	Match    string   `yaml:"match"`
	Whole    bool     `yaml:"whole"`
	Decision Decision `yaml:"decision"`
	Reason   string   `yaml:"reason"`

	re *regexp.Regexp
}

// Verdict is a policy decision with the rule that made it and a reason the
// model can read.
type Verdict struct {
	Decision Decision
	Rule     string
	Reason   string
}

// Policy decides, before a command runs, whether to allow it, ask an
// [Approver], or deny it. Configured Rules are tried first, in order, and
// the first match decides; otherwise the built-in rules apply, and the most
// restrictive built-in match decides:
//
//   - deny: sudo/su/doas, mkfs, dd writing to /dev, piping a download
//     (curl, wget) into a shell or interpreter, rm -r of / or ~, fork
//     bombs, shutdown/reboot;
//   - ask: git push, rm -r of a path outside the workspace, package
//     installs (apt, pip, npm, ...), chmod/chown/chgrp.
//
// A Policy is a guard rail against a model's mistakes, not a security
// boundary: a shell can always hide a command (eval, variables, scripts).
// Isolation is the sandbox's job. The zero Policy applies the built-ins
// with "/workspace" as the workspace.
type Policy struct {
	// Workspace is the sandbox workspace path; relative paths in commands
	// are taken to be inside it.
	Workspace string
	Rules     []Rule
	// NoBuiltins turns the built-in rules off.
	NoBuiltins bool
	// Undo gives the model the undo tool (UndoTool; sage agent with
	// checkpoints registers it when set).
	Undo bool
}

// policyFile is the YAML form of a policy:
//
//	rules:
//	  - name: no-docker
//	    match: '^docker '
//	    decision: deny
//	    reason: docker is not available here
type policyFile struct {
	NoBuiltins bool   `yaml:"no_builtins"`
	Rules      []Rule `yaml:"rules"`
	// Undo: true gives the model the undo tool (sage agent --checkpoints).
	Undo bool `yaml:"undo"`
}

// LoadPolicy reads a policy file.
func LoadPolicy(file, workspace string) (*Policy, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tools: policy: %w", err)
	}
	return ParsePolicy(b, workspace)
}

// ParsePolicy parses the YAML form of a policy.
// Errors name the key as written and what it takes ("rules[1].decison:
// unknown key (line 5); rules[1] takes decision, match, name, reason,
// whole"); the format is in docs/tools.md, section "Command policy".
func ParsePolicy(b []byte, workspace string) (*Policy, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil {
		return nil, fmt.Errorf("tools: policy: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var f policyFile
	if len(n.Content) > 0 { // an empty file is the built-ins alone
		if err := yamlstrict.Decode(&n, "", &f); err != nil {
			return nil, fmt.Errorf("tools: policy: %w", err)
		}
	}
	p := &Policy{Workspace: workspace, Rules: f.Rules, NoBuiltins: f.NoBuiltins, Undo: f.Undo}
	return p, p.compile()
}

func (p *Policy) compile() error {
	for i := range p.Rules {
		r := &p.Rules[i]
		if r.re != nil {
			continue
		}
		re, err := regexp.Compile(r.Match)
		if err != nil {
			return fmt.Errorf("tools: policy: rules[%d].match (%q): %w", i, r.Name, err)
		}
		r.re = re
	}
	return nil
}

// Decide returns the verdict for a command line run in workdir (a sandbox
// path; empty means the workspace).
func (p *Policy) Decide(command, workdir string) Verdict {
	if p == nil {
		p = &Policy{}
	}
	if err := p.compile(); err != nil {
		return Verdict{Decision: Deny, Rule: "policy", Reason: err.Error()}
	}
	cmds := splitCommands(command)
	for _, r := range p.Rules {
		if r.Whole && r.re.MatchString(command) {
			return Verdict{Decision: r.Decision, Rule: r.Name, Reason: r.Reason}
		}
		for _, c := range cmds {
			if r.re.MatchString(strings.Join(c.words, " ")) {
				return Verdict{Decision: r.Decision, Rule: r.Name, Reason: r.Reason}
			}
		}
	}
	if p.NoBuiltins {
		return Verdict{Decision: Allow}
	}
	ws := p.Workspace
	if ws == "" {
		ws = "/workspace"
	}
	if workdir == "" {
		workdir = ws
	} else if !path.IsAbs(workdir) {
		workdir = path.Join(ws, workdir)
	}
	best := Verdict{Decision: Allow}
	if forkBomb.MatchString(command) {
		return Verdict{Decision: Deny, Rule: "fork-bomb", Reason: "a fork bomb would exhaust the sandbox"}
	}
	for i, c := range cmds {
		v := builtin(c, cmds[i+1:], ws, workdir)
		if v.Decision > best.Decision {
			best = v
		}
	}
	return best
}

var forkBomb = regexp.MustCompile(`:\s*\(\s*\)\s*\{[^}]*:\s*\|\s*:`)

var (
	shells      = set("sh", "bash", "zsh", "dash", "ksh", "fish", "python", "python3", "perl", "ruby", "node")
	downloaders = set("curl", "wget")
	installers  = map[string][]string{
		"apt": {"install"}, "apt-get": {"install"}, "yum": {"install"}, "dnf": {"install"},
		"apk": {"add"}, "brew": {"install"}, "pip": {"install"}, "pip3": {"install"},
		"npm": {"install", "i", "add"}, "yarn": {"add", "global"}, "pnpm": {"add", "install"},
		"gem": {"install"}, "cargo": {"install"}, "go": {"install"}, "conda": {"install"}, "uv": {"pip", "add"},
	}
)

func set(xs ...string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// builtin judges one simple command; rest are the commands after it (for
// pipelines into a shell).
func builtin(c simpleCommand, rest []simpleCommand, ws, workdir string) Verdict {
	w := c.words
	if len(w) == 0 {
		return Verdict{}
	}
	name := path.Base(w[0])
	if name == "python" || name == "python3" {
		if len(w) > 2 && w[1] == "-m" && w[2] == "pip" {
			name, w = "pip", w[2:]
		}
	}
	switch {
	case name == "sudo" || name == "su" || name == "doas":
		return Verdict{Deny, "privilege", name + " is not allowed: the sandbox runs without privileges"}
	case strings.HasPrefix(name, "mkfs"):
		return Verdict{Deny, "mkfs", "making file systems is not allowed"}
	case name == "shutdown" || name == "reboot" || name == "halt" || name == "poweroff":
		return Verdict{Deny, "power", name + " is not allowed"}
	case name == "dd" && ddToDevice(w[1:]):
		return Verdict{Deny, "dd-device", "dd writing to a device is not allowed"}
	case downloaders[name] && c.pipeTo && len(rest) > 0 && shells[path.Base(first(rest[0].words))]:
		return Verdict{Deny, "download-pipe-shell", "piping a download into a shell runs unreviewed code; download to a file and read it first"}
	case name == "rm" && recursive(w[1:]):
		return rmVerdict(w[1:], ws, workdir)
	case name == "git" && hasWord(w[1:], "push"):
		return Verdict{Ask, "git-push", "git push publishes changes outside the sandbox"}
	case name == "chmod" || name == "chown" || name == "chgrp":
		return Verdict{Ask, "permissions", name + " changes file ownership or permissions"}
	case installs(name, w[1:]):
		return Verdict{Ask, "install", "installing packages changes the environment and uses the network"}
	}
	if c.redirectDevice {
		return Verdict{Deny, "write-device", "writing to a block device is not allowed"}
	}
	return Verdict{}
}

func first(w []string) string {
	if len(w) == 0 {
		return ""
	}
	return w[0]
}

func hasWord(w []string, s string) bool {
	for _, x := range w {
		if x == s {
			return true
		}
	}
	return false
}

func ddToDevice(args []string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, "of=/dev/") && a != "of=/dev/null" {
			return true
		}
	}
	return false
}

func installs(name string, args []string) bool {
	subs, ok := installers[name]
	if !ok {
		return false
	}
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			continue
		}
		for _, s := range subs {
			if a == s {
				return true
			}
		}
		return false // the first non-flag word is the subcommand
	}
	return false
}

func recursive(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--recursive" || (strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.ContainsAny(a, "rR")) {
			return true
		}
	}
	return false
}

func rmVerdict(args []string, ws, workdir string) Verdict {
	v := Verdict{}
	flags := true
	for _, a := range args {
		if flags && a == "--" {
			flags = false
			continue
		}
		if flags && strings.HasPrefix(a, "-") {
			continue
		}
		if a == "/" || a == "/*" || a == "~" || a == "~/" || strings.HasPrefix(a, "$HOME") || a == "." && workdir == "/" {
			return Verdict{Deny, "rm-root", "recursive removal of / or the home directory is not allowed"}
		}
		p := a
		if strings.HasPrefix(p, "~") || strings.Contains(p, "$") {
			v = Verdict{Ask, "rm-outside-workspace", "recursive removal of " + a + ", which may be outside the workspace"}
			continue
		}
		if !path.IsAbs(p) {
			p = path.Join(workdir, p)
		}
		p = path.Clean(p)
		if p == ws {
			v = Verdict{Ask, "rm-workspace", "recursive removal of the whole workspace"}
		} else if !strings.HasPrefix(p, ws+"/") {
			v = Verdict{Ask, "rm-outside-workspace", "recursive removal of " + p + ", outside the workspace " + ws}
		}
	}
	return v
}

// Approver is asked about commands the policy marks Ask.
type Approver interface {
	// Approve reports whether the command may run. reason, when the answer
	// is no, is shown to the model.
	Approve(ctx context.Context, req ApprovalRequest) (ok bool, reason string, err error)
}

// ApprovalRequest is what an Approver decides on.
type ApprovalRequest struct {
	Command string
	Workdir string
	Verdict Verdict
}

// DenyApprover says no to everything, with the policy's reason. It is the
// default.
type DenyApprover struct{}

// Approve implements Approver.
func (DenyApprover) Approve(_ context.Context, req ApprovalRequest) (bool, string, error) {
	return false, "needs approval (" + req.Verdict.Reason + ") and no approver is configured", nil
}

// ApproveAll says yes to everything. Use it only where a human has
// accepted the risk.
type ApproveAll struct{}

// Approve implements Approver.
func (ApproveAll) Approve(context.Context, ApprovalRequest) (bool, string, error) {
	return true, "", nil
}
