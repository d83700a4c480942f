package tools

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sage-go/sage/sagents/sandbox"
)

// skillFile is the file that makes a folder a skill.
const skillFile = "SKILL.md"

// skillsDir is where skills are copied, relative to the workspace.
const skillsDir = "skills"

var skillName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// Skill is a folder of instructions (and any files they use) that an agent
// can read when a task calls for it. Its SKILL.md starts with YAML front
// matter:
//
//	---
//	name: csv-report
//	description: Summarise a CSV file as a Markdown report.
//	---
//	Instructions...
type Skill struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Dir is the skill's folder on the host.
	Dir string `yaml:"-"`
	// Body is SKILL.md after the front matter.
	Body string `yaml:"-"`
}

// SkillManager loads skills from host folders, installs them into a
// sandbox and describes them for the system prompt.
type SkillManager struct {
	skills []Skill
}

// LoadSkills loads every skill found in dirs: each dir is either a skill
// itself (it holds SKILL.md) or a folder of skill folders. A skill name
// found twice keeps the first.
func LoadSkills(dirs ...string) (*SkillManager, error) {
	m := &SkillManager{}
	seen := map[string]bool{}
	for _, d := range dirs {
		found, err := findSkills(d)
		if err != nil {
			return nil, err
		}
		for _, s := range found {
			if !seen[s.Name] {
				seen[s.Name] = true
				m.skills = append(m.skills, s)
			}
		}
	}
	sort.Slice(m.skills, func(i, j int) bool { return m.skills[i].Name < m.skills[j].Name })
	return m, nil
}

func findSkills(dir string) ([]Skill, error) {
	if _, err := os.Stat(filepath.Join(dir, skillFile)); err == nil {
		s, err := parseSkill(dir)
		if err != nil {
			return nil, err
		}
		return []Skill{s}, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("tools: skills: %w", err)
	}
	var out []Skill
	for _, e := range entries {
		sub := filepath.Join(dir, e.Name())
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(sub, skillFile)); err != nil {
			continue
		}
		s, err := parseSkill(sub)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// parseSkill reads dir/SKILL.md.
func parseSkill(dir string) (Skill, error) {
	file := filepath.Join(dir, skillFile)
	b, err := os.ReadFile(file)
	if err != nil {
		return Skill{}, fmt.Errorf("tools: skill: %w", err)
	}
	front, body, ok := splitFrontMatter(b)
	if !ok {
		return Skill{}, fmt.Errorf("tools: skill %s: no YAML front matter (--- ... ---) at the top", file)
	}
	var s Skill
	if err := yaml.Unmarshal(front, &s); err != nil {
		return Skill{}, fmt.Errorf("tools: skill %s: front matter: %w", file, err)
	}
	s.Description = strings.Join(strings.Fields(s.Description), " ")
	switch {
	case !skillName.MatchString(s.Name):
		return Skill{}, fmt.Errorf("tools: skill %s: name %q: want 1-64 of A-Z a-z 0-9 _ . - (not starting with . _ -)", file, s.Name)
	case s.Description == "":
		return Skill{}, fmt.Errorf("tools: skill %s: description is empty", file)
	}
	s.Dir, s.Body = dir, string(body)
	return s, nil
}

func splitFrontMatter(b []byte) (front, body []byte, ok bool) {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	b = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
	if !bytes.HasPrefix(b, []byte("---\n")) {
		return nil, nil, false
	}
	rest := b[4:]
	i := bytes.Index(rest, []byte("\n---"))
	if i < 0 {
		return nil, nil, false
	}
	after := rest[i+4:]
	if len(after) > 0 && after[0] != '\n' {
		return nil, nil, false
	}
	return rest[:i+1], bytes.TrimPrefix(after, []byte("\n")), true
}

// Skills lists the loaded skills, sorted by name.
func (m *SkillManager) Skills() []Skill { return append([]Skill(nil), m.skills...) }

// skillPath is where a skill lives in the sandbox.
func skillPath(h Sandbox, name string) string {
	return path.Join(h.WorkspacePath(), skillsDir, name)
}

// Install copies each skill into <workspace>/skills/<name>, leaving a skill
// that is already there untouched (the agent may have changed it). It
// returns the names it copied.
func (m *SkillManager) Install(ctx context.Context, h Sandbox) ([]string, error) {
	var copied []string
	for _, s := range m.skills {
		dst := skillPath(h, s.Name)
		exists, err := h.FileExists(ctx, dst)
		if err != nil {
			return copied, fmt.Errorf("tools: install skill %s: %w", s.Name, err)
		}
		if exists {
			continue
		}
		if _, err := h.CopyFromHost(ctx, s.Dir, dst, sandbox.CopyOptions{Ignore: []string{".git"}}); err != nil {
			return copied, fmt.Errorf("tools: install skill %s: %w", s.Name, err)
		}
		copied = append(copied, s.Name)
	}
	return copied, nil
}

// Prompt renders the block for the system prompt: one line per skill with
// its description and where its instructions are. It is "" without skills.
func (m *SkillManager) Prompt(h Sandbox) string {
	if m == nil || len(m.skills) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Skills (read a skill's SKILL.md with file_read before using it):\n")
	for _, s := range m.skills {
		fmt.Fprintf(&b, "- %s: %s (%s/%s)\n", s.Name, s.Description, skillPath(h, s.Name), skillFile)
	}
	return b.String()
}
