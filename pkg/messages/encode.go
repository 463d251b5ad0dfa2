package messages

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// Encoding the messages that travel between the stages. encoding/json spends most of its
// time on them on reflection and on compacting and validating the raw JSON they carry
// (arguments, results), which the stages have validated already. AppendCall,
// AppendResult and AppendOutput write the same JSON objects directly: the same keys, in
// the same order, with the same fields left out when empty; FuzzEncode checks that
// json.Unmarshal reads back what json.Marshal would have written.
//
// The raw fields (ToolCall.Arguments, ToolResult.Result, OutputResult.Result) are written
// as they are, so they must hold valid JSON, as they do everywhere in toolbus: the
// parser writes arguments it produced or checked, the executor validates every result.
// Empty raw arguments are written as null, as encoding/json does.

// AppendCall appends the JSON encoding of c to b.
func AppendCall(b []byte, c *ToolCall) []byte {
	b = appendAddress(b, `{"id":`, c.ID, c.ResponseID, c.Conversation, c.Index, c.Count, c.Next, c.Tool)
	b = appendModel(b, c.ModelID, c.OutputFormat)
	b = append(b, `,"arguments":`...)
	b = appendRaw(b, c.Arguments)
	if len(c.Repairs) > 0 {
		b = append(b, `,"repairs":[`...)
		for i, r := range c.Repairs {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, r)
		}
		b = append(b, ']')
	}
	if !c.Deadline.IsZero() {
		b = append(b, `,"deadline":"`...)
		b = c.Deadline.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	if c.Error != nil {
		b = append(b, `,"error":`...)
		b = appendError(b, c.Error)
	}
	if c.Stream {
		b = append(b, `,"stream":true`...)
	}
	if c.End {
		b = append(b, `,"end":true`...)
	}
	return append(b, '}')
}

// AppendResult appends the JSON encoding of r to b.
func AppendResult(b []byte, r *ToolResult) []byte {
	b = appendAddress(b, `{"call_id":`, r.CallID, r.ResponseID, r.Conversation, r.Index, r.Count, r.Next, r.Tool)
	b = appendModel(b, r.ModelID, r.OutputFormat)
	b = appendOutcome(b, r.Success, r.Result, r.Error, r.Attempts, r.Notice, r.Stored)
	b = appendContent(b, r.Content)
	if r.Backend != "" {
		b = append(b, `,"backend":`...)
		b = appendString(b, r.Backend)
	}
	b = appendCost(b, r.DurationMS, r.ArgumentsBytes, r.Policy)
	if r.Stream {
		b = append(b, `,"stream":true`...)
	}
	if r.End {
		b = append(b, `,"end":true`...)
	}
	return append(b, '}')
}

// AppendOutput appends the JSON encoding of o to b.
func AppendOutput(b []byte, o *Output) []byte {
	b = append(b, `{"response_id":`...)
	b = appendString(b, o.ResponseID)
	b = append(b, `,"conversation":`...)
	b = appendString(b, o.Conversation)
	b = append(b, `,"kind":`...)
	b = appendString(b, string(o.Kind))
	b = append(b, `,"text":`...)
	b = appendString(b, o.Text)
	b = append(b, `,"results":`...)
	if o.Results == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range o.Results {
			r := &o.Results[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '{')
			if r.CallID != "" {
				b = append(b, `"call_id":`...)
				b = appendString(b, r.CallID)
				b = append(b, ',')
			}
			b = append(b, `"tool":`...)
			b = appendString(b, r.Tool)
			b = appendOutcome(b, r.Success, r.Result, r.Error, r.Attempts, r.Notice, r.Stored)
			b = appendContent(b, r.Content)
			b = appendCost(b, r.DurationMS, r.ArgumentsBytes, r.Policy)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if o.NativeFormat != "" {
		b = append(b, `,"native_format":`...)
		b = appendString(b, o.NativeFormat)
	}
	if len(o.Native) > 0 {
		b = append(b, `,"native":`...)
		b = append(b, o.Native...)
	}
	return append(b, '}')
}

// appendModel writes "model_id" and "output_format" when set.
func appendModel(b []byte, modelID, outputFormat string) []byte {
	if modelID != "" {
		b = append(b, `,"model_id":`...)
		b = appendString(b, modelID)
	}
	if outputFormat != "" {
		b = append(b, `,"output_format":`...)
		b = appendString(b, outputFormat)
	}
	return b
}

// appendContent writes "content" when there is some, with encoding/json: rare, and of
// a few blocks.
func appendContent(b []byte, cs []Content) []byte {
	if len(cs) == 0 {
		return b
	}
	enc, err := json.Marshal(cs)
	if err != nil { // plain strings, numbers and bools: never
		return b
	}
	b = append(b, `,"content":`...)
	return append(b, enc...)
}

// appendCost writes "duration_ms", "arguments_bytes" and "policy" when set.
func appendCost(b []byte, durationMS float64, argumentsBytes int, policy string) []byte {
	if durationMS != 0 && !math.IsNaN(durationMS) && !math.IsInf(durationMS, 0) {
		b = append(b, `,"duration_ms":`...)
		b = strconv.AppendFloat(b, durationMS, 'g', -1, 64)
	}
	if argumentsBytes != 0 {
		b = append(b, `,"arguments_bytes":`...)
		b = strconv.AppendInt(b, int64(argumentsBytes), 10)
	}
	if policy != "" {
		b = append(b, `,"policy":`...)
		b = appendString(b, policy)
	}
	return b
}

// appendAddress writes the fields that place a call or a result, the first of them
// opened by idKey.
func appendAddress(b []byte, idKey, id, responseID, conversation string, index, count, next int, tool string) []byte {
	b = append(b, idKey...)
	b = appendString(b, id)
	b = append(b, `,"response_id":`...)
	b = appendString(b, responseID)
	b = append(b, `,"conversation":`...)
	b = appendString(b, conversation)
	b = append(b, `,"index":`...)
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, `,"count":`...)
	b = strconv.AppendInt(b, int64(count), 10)
	if next != 0 {
		b = append(b, `,"next":`...)
		b = strconv.AppendInt(b, int64(next), 10)
	}
	b = append(b, `,"tool":`...)
	return appendString(b, tool)
}

// appendOutcome writes how a call ended: "success", and "result", "error", "attempts",
// "notice" and "stored" when set.
func appendOutcome(b []byte, success bool, result []byte, e *ResultError, attempts int, notice string, stored *StoredResult) []byte {
	b = append(b, `,"success":`...)
	b = strconv.AppendBool(b, success)
	if len(result) > 0 {
		b = append(b, `,"result":`...)
		b = append(b, result...)
	}
	if e != nil {
		b = append(b, `,"error":`...)
		b = appendError(b, e)
	}
	if attempts != 0 {
		b = append(b, `,"attempts":`...)
		b = strconv.AppendInt(b, int64(attempts), 10)
	}
	if notice != "" {
		b = append(b, `,"notice":`...)
		b = appendString(b, notice)
	}
	if stored != nil {
		b = append(b, `,"stored":{"bucket":`...)
		b = appendString(b, stored.Bucket)
		b = append(b, `,"name":`...)
		b = appendString(b, stored.Name)
		b = append(b, `,"size":`...)
		b = strconv.AppendInt(b, int64(stored.Size), 10)
		b = append(b, `,"sha256":`...)
		b = appendString(b, stored.SHA256)
		b = append(b, '}')
	}
	return b
}

func appendError(b []byte, e *ResultError) []byte {
	b = append(b, `{"code":`...)
	b = appendString(b, string(e.Code))
	b = append(b, `,"message":`...)
	b = appendString(b, e.Message)
	return append(b, '}')
}

func appendRaw(b []byte, raw []byte) []byte {
	if len(raw) == 0 {
		return append(b, "null"...)
	}
	return append(b, raw...)
}

// appendString appends s as a JSON string: quotes, backslashes and control characters
// escaped, invalid UTF-8 replaced by U+FFFD, as encoding/json writes it (without its HTML
// escaping, which JSON does not need).
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			// Valid JSON, but not valid JavaScript: escaped, as encoding/json does.
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
