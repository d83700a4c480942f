package driver

import (
	"fmt"
	"strings"

	"github.com/sage-go/sage/internal/termsafe"
)

// String renders the tree, one entry a line, directories with a slash.
// Names are quoted as ls quotes them (termsafe.Name): control characters
// and escape sequences made inside a sandbox never reach a terminal raw.
func (n *TreeNode) String() string {
	var b strings.Builder
	n.render(&b, "")
	if n.Truncated {
		b.WriteString("... (truncated: the walk stopped at its entry limit)\n")
	}
	return b.String()
}

func (n *TreeNode) render(b *strings.Builder, indent string) {
	b.WriteString(indent + termsafe.Name(n.Name))
	if n.IsDir {
		b.WriteString("/")
	}
	b.WriteString("\n")
	for _, c := range n.Children {
		c.render(b, indent+"  ")
	}
	if n.Omitted > 0 {
		fmt.Fprintf(b, "%s  ... %d more\n", indent, n.Omitted)
	}
}
