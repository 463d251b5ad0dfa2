package mcpwire

import (
	"bufio"
	"io"
)

// JSONLines exposes the stdio line filter to the external tests.
func JSONLines(r io.Reader, stray func(string)) io.Reader {
	return &jsonLines{r: bufio.NewReaderSize(r, 16), stray: stray}
}

// RPCLine exposes rpcLine.
var RPCLine = rpcLine
