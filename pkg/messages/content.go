package messages

import (
	"encoding/base64"
	"strconv"
)

// The kinds of [Content] a result keeps.
const (
	ContentImage    = "image"
	ContentAudio    = "audio"
	ContentResource = "resource"
)

// Content is a block of a tool's result that a model cannot read as text (an image,
// audio, a resource embedded with a blob), kept for the orchestrator as MCP writes it,
// in the call's [ToolResult.Content] and [OutputResult.Content]. The result's value,
// which the model reads, names it in its place instead of holding its base64
// ([ContentName]: "[image: image/png, 19 KB, content 1]"), so that an orchestrator can
// hand it to a model that sees images and one that reads only the text loses nothing
// but the bytes.
//
// A block too large to travel inline is kept whole in the object store, as a large
// result is: Stored names the object (its decoded bytes), and Data (or Resource.Blob) is
// empty. Omitted says that its data was too large to travel and could not be kept.
type Content struct {
	// Type is "image", "audio" or "resource".
	Type string `json:"type"`
	// MimeType and Data (base64) of an image or audio.
	MimeType string `json:"mimeType,omitempty"`
	Data     string `json:"data,omitempty"`
	// Resource is an embedded resource's contents.
	Resource *ResourceContents `json:"resource,omitempty"`
	// Size is the size of the block's data, decoded, in bytes.
	Size   int           `json:"size,omitempty"`
	Stored *StoredResult `json:"stored,omitempty"`
	// Omitted: the data was neither passed on nor kept.
	Omitted bool `json:"omitted,omitempty"`
}

// ResourceContents is an embedded resource of a tool's result: its URI, type, and its
// contents as base64 (Blob).
//
// An embedded text resource (MCP's text resource contents) is written out in the text
// the model reads; its block is kept too, IsText, after the blocks the text names (whose
// places, "content N", it leaves as they were), so that an MCP client of the front door
// gets it back as the text resource it was. Its Blob holds the text's UTF-8 bytes as
// base64, as a blob's, so that it is fitted, stored and fetched as any block is.
type ResourceContents struct {
	URI      string `json:"uri"`
	MimeType string `json:"mimeType,omitempty"`
	Blob     string `json:"blob,omitempty"`
	IsText   bool   `json:"isText,omitempty"`
}

// MimeOf is the block's media type, of its resource for an embedded one.
func (c *Content) MimeOf() string {
	if c.Resource != nil && c.MimeType == "" {
		return c.Resource.MimeType
	}
	return c.MimeType
}

// Inline is the block's base64 data as it travels (empty when stored or omitted).
func (c *Content) Inline() string {
	if c.Resource != nil {
		return c.Resource.Blob
	}
	return c.Data
}

// SetInline replaces the block's base64 data.
func (c *Content) SetInline(data string) {
	if c.Resource != nil {
		c.Resource.Blob = data
		return
	}
	c.Data = data
}

// Decode returns the block's inline data decoded from base64 (standard, padded or not).
func (c *Content) Decode() ([]byte, error) {
	s := c.Inline()
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return b, nil
	}
	return base64.RawStdEncoding.DecodeString(s)
}

// ContentName is how the model's text names the block c at position n (from 1) of a
// result's Content: "[image: image/png, 19 KB, content 1]", a resource with its URI
// ("[resource: file:///a.pdf, application/pdf, 2 MB, content 2]").
func ContentName(c Content, n int) string {
	b := make([]byte, 0, 64)
	b = append(b, '[')
	b = append(b, c.Type...)
	b = append(b, ": "...)
	if c.Resource != nil && c.Resource.URI != "" {
		b = append(b, c.Resource.URI...)
		b = append(b, ", "...)
	}
	if m := c.MimeOf(); m != "" {
		b = append(b, m...)
		b = append(b, ", "...)
	}
	b = append(b, HumanBytes(c.Size)...)
	b = append(b, ", content "...)
	b = strconv.AppendInt(b, int64(n), 10)
	return string(append(b, ']'))
}

// HumanBytes writes a size as people read it: "512 bytes", "19 KB", "2.4 MB" (units of
// 1,024).
func HumanBytes(n int) string {
	switch {
	case n < 1<<10:
		return strconv.Itoa(n) + " bytes"
	case n < 1<<20:
		return strconv.Itoa((n+1<<9)>>10) + " KB"
	default:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MB"
	}
}

// ContentBytes is what the blocks' data adds to a message: their base64.
func ContentBytes(cs []Content) int {
	n := 0
	for i := range cs {
		n += len(cs[i].Inline())
	}
	return n
}

// InlineBytes is the size of what r carries that may be large: its result and the data
// of its content blocks. A result is fitted to a size by it ([CapResult], results.Store).
func (r *ToolResult) InlineBytes() int {
	if len(r.Content) == 0 {
		return len(r.Result)
	}
	return len(r.Result) + ContentBytes(r.Content)
}

// omitContent drops the inline data of r's content blocks, a copy of them, marking each
// omitted: what is left when they cannot be kept.
func omitContent(cs []Content) []Content {
	out := make([]Content, len(cs))
	for i, c := range cs {
		if c.Inline() != "" {
			if c.Resource != nil {
				res := *c.Resource
				c.Resource = &res
			}
			c.SetInline("")
			c.Omitted = true
		}
		out[i] = c
	}
	return out
}
