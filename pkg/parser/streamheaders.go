package parser

import (
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/toolbus/toolbus/pkg/messages"
)

// DefaultMaxChunks bounds the chunks of a streamed response unless configured
// (parser.stream_max_chunks): each chunk rewrites the text read so far, so a response
// of many tiny chunks costs their number times its size.
const DefaultMaxChunks = 10000

// ChunkHeaders is what a chunk's headers say of its place in its response.
type ChunkHeaders struct {
	// N numbers the chunk, from 1; Final marks the last one.
	N     int
	Final bool
	// End, set when the final mark cannot be read, is the parse_error that ends the
	// response at this chunk's place (the chunks before it are read first).
	End *messages.ToolError
}

// ReadChunkHeaders reads the number (messages.HeaderChunk, 1 to maxChunks) and the
// final mark (messages.HeaderFinal, [ParseFlag]) of a chunk. A value nobody can read
// is a parse_error that says which and why: the response is answered with it, never
// left waiting for a chunk it already had. A number that cannot be placed is the
// error returned (the response ends at once); a final mark that cannot be read is
// End (the response ends at the chunk's place).
func ReadChunkHeaders(h nats.Header, maxChunks int) (ChunkHeaders, *messages.ToolError) {
	raw := h.Get(messages.HeaderChunk)
	if raw == "" {
		return ChunkHeaders{}, messages.Errorf(messages.CodeParseError,
			"a chunk of the streamed response has no %s header (its number, from 1); the response was ended there", messages.HeaderChunk)
	}
	n, err := strconv.Atoi(strings.TrimSpace(raw))
	if err != nil || n < 1 {
		return ChunkHeaders{}, messages.Errorf(messages.CodeParseError,
			"a chunk of the streamed response has %s %q, not a number from 1; the response was ended there", messages.HeaderChunk, messages.EchoArguments(raw))
	}
	if maxChunks > 0 && n > maxChunks {
		return ChunkHeaders{N: n}, messages.Errorf(messages.CodeParseError,
			"chunk %d of the streamed response is past the limit of %d chunks (parser.stream_max_chunks); the response was ended there", n, maxChunks)
	}
	final, ok := ParseFlag(h.Get(messages.HeaderFinal))
	if !ok {
		return ChunkHeaders{N: n, End: messages.Errorf(messages.CodeParseError,
			"chunk %d of the streamed response has %s %q, which is neither true (true, 1, yes, on) nor false (false, 0, no, off); the response was ended there",
			n, messages.HeaderFinal, messages.EchoArguments(h.Get(messages.HeaderFinal)))}, nil
	}
	return ChunkHeaders{N: n, Final: final}, nil
}

// ParseFlag reads a boolean header as people write them: true, 1, yes, on, t, y and
// false, 0, no, off, f, n, in any case and with spaces around; an empty value is
// false. ok is false for anything else.
func ParseFlag(v string) (value, ok bool) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "1", "yes", "on", "t", "y":
		return true, true
	case "", "false", "0", "no", "off", "f", "n":
		return false, true
	}
	return false, false
}
