package messages

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/toolbus/toolbus/pkg/jsonscan"
)

// Decoding the messages that travel between the stages. Every hop decodes one, and
// encoding/json spends most of that time on reflection and on validating the whole
// message before decoding it. DecodeCall, DecodeResult and DecodeOutput read the shape
// toolbus itself writes directly and hand anything else (escaped keys, keys in another
// case, duplicate keys, nulls, unknown fields, numbers an int cannot hold, …) to
// encoding/json, so that they accept and produce exactly what json.Unmarshal does
// (FuzzDecode checks that).

// DecodeCall decodes a call message into c, as json.Unmarshal(data, c) does for a zero
// c: what c held before is replaced, not merged.
func DecodeCall(data []byte, c *ToolCall) error {
	var v ToolCall
	if decodeCall(data, &v) {
		*c = v
		return nil
	}
	*c = ToolCall{}
	return json.Unmarshal(data, c)
}

// DecodeResult decodes a result message into r, as json.Unmarshal(data, r) does for a
// zero r.
func DecodeResult(data []byte, r *ToolResult) error {
	var v ToolResult
	if decodeResult(data, &v) {
		*r = v
		return nil
	}
	*r = ToolResult{}
	return json.Unmarshal(data, r)
}

// DecodeOutput decodes an output message into o, as json.Unmarshal(data, o) does for a
// zero o.
func DecodeOutput(data []byte, o *Output) error {
	var v Output
	if decodeOutput(data, &v) {
		*o = v
		return nil
	}
	*o = Output{}
	return json.Unmarshal(data, o)
}

// DecodeMembers decodes a JSON object into its members' raw values, as json.Unmarshal
// into a nil map[string]json.RawMessage does: what tool arguments and JSON-RPC messages
// are read into before their members are.
func DecodeMembers(data []byte) (map[string]json.RawMessage, error) {
	if m, ok := decodeMembers(data); ok {
		return m, nil
	}
	var m map[string]json.RawMessage
	err := json.Unmarshal(data, &m)
	return m, err
}

// DecodeString decodes a JSON string, as json.Unmarshal into a string does (null leaves
// it "").
func DecodeString(data []byte) (string, error) {
	r := &reader{data: data}
	var s string
	if r.str(&s) {
		if r.ws(); r.i == len(data) {
			return s, nil
		}
	}
	s = ""
	err := json.Unmarshal(data, &s)
	return s, err
}

func decodeMembers(data []byte) (map[string]json.RawMessage, bool) {
	if i := jsonscan.SkipSpace(data, 0); i >= len(data) || data[i] != '{' {
		return nil, false
	}
	own := bytes.Clone(data) // one copy: the values are slices of it
	m := map[string]json.RawMessage{}
	ok := readObject(own, func(r *reader, key string) bool {
		start := r.i
		end, ok := valueEnd(r.data, start)
		if ok {
			m[key], r.i = r.data[start:end:end], end
		}
		return ok
	})
	return m, ok
}

func decodeCall(data []byte, c *ToolCall) bool {
	return readObject(data, func(r *reader, key string) bool {
		switch key {
		case "id":
			return r.str(&c.ID)
		case "response_id":
			return r.str(&c.ResponseID)
		case "conversation":
			return r.str(&c.Conversation)
		case "index":
			return r.int(&c.Index)
		case "count":
			return r.int(&c.Count)
		case "next":
			return r.int(&c.Next)
		case "tool":
			return r.str(&c.Tool)
		case "model_id":
			return r.str(&c.ModelID)
		case "output_format":
			return r.str(&c.OutputFormat)
		case "arguments":
			return r.raw((*[]byte)(&c.Arguments))
		case "repairs":
			return r.strings(&c.Repairs)
		case "deadline":
			return r.time(&c.Deadline)
		case "error":
			c.Error = new(ResultError)
			return r.resultError(c.Error)
		case "stream":
			return r.bool(&c.Stream)
		case "end":
			return r.bool(&c.End)
		}
		return false
	})
}

func decodeResult(data []byte, res *ToolResult) bool {
	return readObject(data, func(r *reader, key string) bool {
		return r.resultMember(res, key)
	})
}

func (r *reader) resultMember(res *ToolResult, key string) bool {
	switch key {
	case "call_id":
		return r.str(&res.CallID)
	case "response_id":
		return r.str(&res.ResponseID)
	case "conversation":
		return r.str(&res.Conversation)
	case "index":
		return r.int(&res.Index)
	case "count":
		return r.int(&res.Count)
	case "next":
		return r.int(&res.Next)
	case "tool":
		return r.str(&res.Tool)
	case "model_id":
		return r.str(&res.ModelID)
	case "output_format":
		return r.str(&res.OutputFormat)
	case "success":
		return r.bool(&res.Success)
	case "result":
		return r.raw((*[]byte)(&res.Result))
	case "error":
		res.Error = new(ResultError)
		return r.resultError(res.Error)
	case "attempts":
		return r.int(&res.Attempts)
	case "notice":
		return r.str(&res.Notice)
	case "stored":
		res.Stored = new(StoredResult)
		return r.stored(res.Stored)
	case "backend":
		return r.str(&res.Backend)
	case "duration_ms":
		return r.float(&res.DurationMS)
	case "arguments_bytes":
		return r.int(&res.ArgumentsBytes)
	case "policy":
		return r.str(&res.Policy)
	case "stream":
		return r.bool(&res.Stream)
	case "end":
		return r.bool(&res.End)
	}
	return false
}

func decodeOutput(data []byte, o *Output) bool {
	return readObject(data, func(r *reader, key string) bool {
		switch key {
		case "response_id":
			return r.str(&o.ResponseID)
		case "conversation":
			return r.str(&o.Conversation)
		case "kind":
			return r.str((*string)(&o.Kind))
		case "text":
			return r.str(&o.Text)
		case "results":
			return r.array(func() bool {
				var or OutputResult
				if !r.object(func(key string) bool {
					switch key {
					case "call_id":
						return r.str(&or.CallID)
					case "tool":
						return r.str(&or.Tool)
					case "success":
						return r.bool(&or.Success)
					case "result":
						return r.raw((*[]byte)(&or.Result))
					case "error":
						or.Error = new(ResultError)
						return r.resultError(or.Error)
					case "attempts":
						return r.int(&or.Attempts)
					case "notice":
						return r.str(&or.Notice)
					case "stored":
						or.Stored = new(StoredResult)
						return r.stored(or.Stored)
					case "duration_ms":
						return r.float(&or.DurationMS)
					case "arguments_bytes":
						return r.int(&or.ArgumentsBytes)
					case "policy":
						return r.str(&or.Policy)
					}
					return false
				}) {
					return false
				}
				o.Results = append(o.Results, or)
				return true
			}, func() { o.Results = []OutputResult{} })
		case "native_format":
			return r.str(&o.NativeFormat)
		case "native":
			return r.raw((*[]byte)(&o.Native))
		}
		return false
	})
}

func (r *reader) stored(s *StoredResult) bool {
	return r.object(func(key string) bool {
		switch key {
		case "bucket":
			return r.str(&s.Bucket)
		case "name":
			return r.str(&s.Name)
		case "size":
			return r.int(&s.Size)
		case "sha256":
			return r.str(&s.SHA256)
		}
		return false
	})
}

func (r *reader) resultError(e *ResultError) bool {
	return r.object(func(key string) bool {
		switch key {
		case "code":
			return r.str((*string)(&e.Code))
		case "message":
			return r.str(&e.Message)
		}
		return false
	})
}

// reader reads one JSON value of the shapes above; every method returns false when the
// input is anything it does not read exactly as encoding/json would.
type reader struct {
	data []byte
	i    int
	seen []string // keys of the objects being read, to refuse duplicates
	buf  [24]string
}

// readObject reads data as one object whose members member reads, and nothing after it.
func readObject(data []byte, member func(r *reader, key string) bool) bool {
	r := &reader{data: data}
	r.seen = r.buf[:0]
	if !r.object(func(key string) bool { return member(r, key) }) {
		return false
	}
	r.ws()
	return r.i == len(r.data)
}

func (r *reader) ws() {
	for r.i < len(r.data) {
		switch r.data[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

func (r *reader) peek() byte {
	r.ws()
	if r.i < len(r.data) {
		return r.data[r.i]
	}
	return 0
}

// object reads {"key": value, …}, calling member for each key with the reader at its value.
func (r *reader) object(member func(key string) bool) bool {
	if r.peek() != '{' {
		return false
	}
	r.i++
	mark := len(r.seen)
	defer func() { r.seen = r.seen[:mark] }()
	if r.peek() == '}' {
		r.i++
		return true
	}
	for {
		if r.peek() != '"' {
			return false
		}
		key, ok := r.plainKey()
		if !ok {
			return false
		}
		for _, k := range r.seen[mark:] {
			if k == key {
				return false
			}
		}
		r.seen = append(r.seen, key)
		if r.peek() != ':' {
			return false
		}
		r.i++
		if r.peek() == 'n' || !member(key) {
			return false // null, or a key read otherwise
		}
		switch r.peek() {
		case ',':
			r.i++
		case '}':
			r.i++
			return true
		default:
			return false
		}
	}
}

// array reads [value, …], calling elem with the reader at each value; empty runs for [].
func (r *reader) array(elem func() bool, empty func()) bool {
	if r.peek() != '[' {
		return false
	}
	r.i++
	if r.peek() == ']' {
		r.i++
		empty()
		return true
	}
	for {
		if !elem() {
			return false
		}
		switch r.peek() {
		case ',':
			r.i++
		case ']':
			r.i++
			return true
		default:
			return false
		}
	}
}

// plainString reads a string without escapes, of valid UTF-8 and no control bytes.
func (r *reader) plainString() (string, bool) {
	start := r.i + 1
	end, ok := r.plainEnd()
	if !ok {
		return "", false
	}
	return string(r.data[start:end]), true
}

// plainKey is plainString for a member's key, without a copy: the key shares the
// message's bytes. The readers only compare keys while they decode, and DecodeMembers
// keeps its keys with the copy of the message it owns, so no key outlives or sees a
// change of the bytes it shares.
func (r *reader) plainKey() (string, bool) {
	start := r.i + 1
	end, ok := r.plainEnd()
	if !ok || end == start {
		return "", ok
	}
	return unsafe.String(&r.data[start], end-start), true
}

// plainEnd moves the reader past a plain string (see plainString) and returns the index
// of its closing quote.
func (r *reader) plainEnd() (int, bool) {
	start := r.i + 1
	ascii := true
	for j := start; j < len(r.data); j++ {
		c := r.data[j]
		switch {
		case c == '"':
			if !ascii && !utf8.Valid(r.data[start:j]) {
				return 0, false
			}
			r.i = j + 1
			return j, true
		case c == '\\' || c < 0x20:
			return 0, false
		case c >= 0x80:
			ascii = false
		}
	}
	return 0, false
}

func (r *reader) str(dst *string) bool {
	if r.peek() != '"' {
		return false
	}
	if s, ok := r.plainString(); ok {
		*dst = s
		return true
	}
	// Escapes (an output's text is full of them: its blocks' quotes and line ends).
	end, ok := stringEnd(r.data, r.i)
	if !ok {
		return false
	}
	u, ok := unquote(r.data[r.i+1 : end-1])
	if !ok {
		return false
	}
	*dst = u
	r.i = end
	return true
}

// unquote decodes the inside of a JSON string as encoding/json does: the escapes JSON
// has, \u pairs of surrogates joined and a lone surrogate read as U+FFFD, invalid UTF-8
// read as U+FFFD byte by byte; control characters, a stray quote or another escape make
// it invalid (FuzzDecode compares the two).
func unquote(s []byte) (string, bool) {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 >= len(s) {
				return "", false
			}
			switch e := s[i+1]; e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				rr := hex4(s[i+2:])
				if rr < 0 {
					return "", false
				}
				i += 6
				if utf16.IsSurrogate(rr) {
					if len(s) >= i+6 && s[i] == '\\' && s[i+1] == 'u' {
						if rr1 := hex4(s[i+2:]); rr1 >= 0 {
							if dec := utf16.DecodeRune(rr, rr1); dec != utf8.RuneError {
								b = utf8.AppendRune(b, dec)
								i += 6
								continue
							}
						}
					}
					rr = utf8.RuneError
				}
				b = utf8.AppendRune(b, rr)
				continue
			default:
				return "", false
			}
			i += 2
		case c == '"' || c < 0x20:
			return "", false
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			rr, size := utf8.DecodeRune(s[i:])
			b = utf8.AppendRune(b, rr)
			i += size
		}
	}
	return string(b), true
}

// hex4 reads four hex digits; -1 when they are not.
func hex4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

func (r *reader) strings(dst *[]string) bool {
	var out []string
	ok := r.array(func() bool {
		var s string
		if !r.str(&s) {
			return false
		}
		out = append(out, s)
		return true
	}, func() { out = []string{} })
	if ok {
		*dst = out
	}
	return ok
}

// number returns the JSON number at the reader, checked against JSON's grammar.
func (r *reader) number() ([]byte, bool) {
	r.ws()
	d, i := r.data, r.i
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	default:
		return nil, false
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return nil, false
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return nil, false
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	}
	n := d[r.i:i]
	r.i = i
	return n, true
}

func (r *reader) int(dst *int) bool {
	n, ok := r.number()
	if !ok || len(n) > 18 || bytes.ContainsAny(n, ".eE") {
		return false // a fraction or exponent, or near the int's limits: encoding/json decides
	}
	v, err := strconv.Atoi(string(n))
	if err != nil {
		return false
	}
	*dst = v
	return true
}

func (r *reader) float(dst *float64) bool {
	n, ok := r.number()
	if !ok {
		return false
	}
	v, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return false
	}
	*dst = v
	return true
}

func (r *reader) bool(dst *bool) bool {
	r.ws()
	switch {
	case bytes.HasPrefix(r.data[r.i:], []byte("true")):
		*dst, r.i = true, r.i+4
	case bytes.HasPrefix(r.data[r.i:], []byte("false")):
		*dst, r.i = false, r.i+5
	default:
		return false
	}
	return true
}

// time reads a string as time.Time's UnmarshalJSON does.
func (r *reader) time(dst *time.Time) bool {
	if r.peek() != '"' {
		return false
	}
	end, ok := stringEnd(r.data, r.i)
	if !ok || dst.UnmarshalJSON(r.data[r.i:end]) != nil {
		return false
	}
	r.i = end
	return true
}

// raw reads any JSON value and keeps a copy of its bytes, as json.RawMessage does.
func (r *reader) raw(dst *[]byte) bool {
	r.ws()
	start := r.i
	end, ok := valueEnd(r.data, start)
	if !ok {
		return false
	}
	*dst = bytes.Clone(r.data[start:end])
	r.i = end
	return true
}
