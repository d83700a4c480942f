package einosage_test

import "time"

// The streamed agent run ends in a goroutine reading the graph's output.
const (
	sagetestWait = 30 * time.Second
	sagetestTick = 10 * time.Millisecond
)
