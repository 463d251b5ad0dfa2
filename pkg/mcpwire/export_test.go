package mcpwire

import (
	"bufio"
	"io"
	"time"
)

// SetFinishWait sets how long the end of an answer's body is read, until the test ends.
func SetFinishWait(t interface{ Cleanup(func()) }, d time.Duration) {
	old := finishWait.Swap(int64(d))
	t.Cleanup(func() { finishWait.Store(old) })
}

// JSONLines exposes the stdio line filter to the external tests.
func JSONLines(r io.Reader, stray func(string)) io.Reader {
	return &jsonLines{r: bufio.NewReaderSize(r, 16), stray: stray}
}

// RPCLine exposes rpcLine.
var RPCLine = rpcLine
