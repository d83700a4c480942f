// Package b uses a.
package b

import (
	"fmt"

	"example.com/m/a"
)

func B() fmt.Stringer {
	var u a.Used
	u.M()
	return a.New()
}
