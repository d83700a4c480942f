package tools

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// boundText keeps at most about limit bytes of text: the head (60%) and the tail
// (40%), cut at line ends where one is near, with a marker between them that
// says how much was cut, from which lines, and where the full text is
// (fullPath, when not empty). Text within the limit is returned unchanged.
func boundText(text string, limit int, fullPath string) string {
	if len(text) <= limit {
		return text
	}
	if limit < 64 {
		limit = 64
	}
	headEnd := cutBack(text, limit*6/10)
	tailStart := cutForward(text, len(text)-(limit-headEnd))
	if tailStart < headEnd {
		tailStart = headEnd
	}
	cut := text[headEnd:tailStart]
	firstLine := strings.Count(text[:headEnd], "\n") + 1
	lastLine := firstLine + strings.Count(cut, "\n")
	where := "the full output was not saved"
	if fullPath != "" {
		where = "full output: " + fullPath + " (read parts of it with file_read start_line/end_line or grep)"
	}
	marker := fmt.Sprintf("\n[... %d bytes (about %d tokens) cut from the middle, lines %d-%d of %d; %s ...]\n",
		len(cut), len(cut)/bytesPerToken, firstLine, lastLine, strings.Count(text, "\n")+1, where)
	return text[:headEnd] + marker + text[tailStart:]
}

// cutBack returns an index <= i at a line start near i (within 1/4 of i),
// else at a rune start.
func cutBack(s string, i int) int {
	if j := strings.LastIndexByte(s[:i], '\n'); j >= 0 && j >= i*3/4 {
		return j + 1
	}
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// cutForward returns an index >= i at a line start near i, else at a rune
// start.
func cutForward(s string, i int) int {
	if i <= 0 {
		return 0
	}
	span := (len(s) - i) / 4
	if j := strings.IndexByte(s[i:], '\n'); j >= 0 && j <= span {
		return i + j + 1
	}
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return i
}
