package messages_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/toolbus/toolbus/internal/asyncapitest"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/messages"
)

// The description of every message (docs/asyncapi.yaml) is held to pkg/messages here:
// its schemas to the types' fields, its enums to the constants, and every message the
// constructors and encoders build to the schema of the channel it travels on. The
// end-to-end half is pkg/toolbus TestMessagesOnTheWireFitTheDocument.

// schemaTypes pairs each schema of the document with the type it describes.
var schemaTypes = map[string]any{
	"ToolCall":        messages.ToolCall{},
	"ToolResult":      messages.ToolResult{},
	"ResultError":     messages.ResultError{},
	"StoredResult":    messages.StoredResult{},
	"Output":          messages.Output{},
	"OutputResult":    messages.OutputResult{},
	"DeadLetter":      messages.DeadLetter{},
	"DeadCall":        messages.DeadCall{},
	"HealthStatus":    messages.HealthStatus{},
	"HealthChange":    messages.HealthChange{},
	"ProbeRequest":    messages.ProbeRequest{},
	"ProbeAnswer":     messages.ProbeAnswer{},
	"ElicitRequest":   messages.ElicitRequest{},
	"ElicitResponse":  messages.ElicitResponse{},
	"ApprovalRequest": messages.ApprovalRequest{},
	"Approval":        messages.Approval{},
	"ResourceUpdated": messages.ResourceUpdated{},
}

// notOnTheWire are fields of the types that never travel, by schema and JSON name.
var notOnTheWire = map[string]string{
	"OutputResult.result": "an output's results carry no result: it travels in its block of the text (Output.FillResults reads it back)",
}

// jsonFields are the JSON names of a struct's fields.
func jsonFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		if f.Anonymous && f.Tag.Get("json") == "" && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type)...) // encoding/json writes its fields in place
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Every field of every message type is a property of its schema, and every property a
// field: a field added to a message is one the document must describe.
func TestSchemasFitTheTypes(t *testing.T) {
	doc := asyncapitest.Load(t)
	for name, v := range schemaTypes {
		t.Run(name, func(t *testing.T) {
			fields := jsonFields(reflect.TypeOf(v))
			props := doc.Properties(name)
			if len(props) == 0 {
				t.Fatalf("%s has no schema %s with properties", asyncapitest.Path, name)
			}
			for _, f := range fields {
				if !slices.Contains(props, f) && notOnTheWire[name+"."+f] == "" {
					t.Errorf("messages.%s has field %q, which schema %s lacks", name, f, name)
				}
			}
			for _, p := range props {
				if !slices.Contains(fields, p) {
					t.Errorf("schema %s has property %q, which messages.%s lacks", name, p, name)
				}
			}
		})
	}
	// The preview object (unexported) is what messages.Preview writes.
	var preview map[string]any
	if err := json.Unmarshal(messages.Preview([]byte(`"xxxxxxxx"`), 4, nil), &preview); err != nil {
		t.Fatal(err)
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range preview {
			if !yield(k) {
				return
			}
		}
	})
	if props := doc.Properties("Preview"); !slices.Equal(keys, props) {
		t.Errorf("messages.Preview writes %v, schema Preview has %v", keys, props)
	}
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// sameSet reports what one list has that the other lacks.
func sameSet(t *testing.T, what string, inCode, inDoc []string) {
	t.Helper()
	for _, c := range inCode {
		if !slices.Contains(inDoc, c) {
			t.Errorf("%s %q is defined in pkg/messages but not in %s", what, c, asyncapitest.Path)
		}
	}
	for _, c := range inDoc {
		if !slices.Contains(inCode, c) {
			t.Errorf("%s %q is in %s but pkg/messages defines no such one", what, c, asyncapitest.Path)
		}
	}
}

func values(cs []asyncapitest.Const) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Value)
	}
	return out
}

// The document's enums are exactly the constants pkg/messages defines, all of them;
// every header name pkg/messages defines is a header of one of its messages.
func TestEnumsAndHeadersFitTheConstants(t *testing.T) {
	doc := asyncapitest.Load(t)
	consts := asyncapitest.MessagesConstants(t)
	ofType := func(typ string) []string {
		var out []string
		for _, c := range consts {
			if c.Type == typ {
				out = append(out, c.Value)
			}
		}
		return out
	}
	codes := values(asyncapitest.ErrorCodes(t))
	if len(codes) < 11 || !slices.Contains(codes, string(messages.CodeInternal)) {
		t.Fatalf("found the error codes %v in pkg/messages: the source reader misses some", codes)
	}
	sameSet(t, "error code", codes, doc.Enum("ErrorCode"))
	sameSet(t, "health state", ofType("HealthState"), doc.Enum("HealthState"))
	sameSet(t, "output kind", ofType("OutputKind"), func() []string {
		var kinds []string
		for _, k := range doc.Raw["components"].(map[string]any)["schemas"].(map[string]any)["Output"].(map[string]any)["properties"].(map[string]any)["kind"].(map[string]any)["enum"].([]any) {
			kinds = append(kinds, k.(string))
		}
		return kinds
	}())

	headers := asyncapitest.Headers(t)
	if len(headers) < 13 {
		t.Fatalf("found the headers %v in pkg/messages: the source reader misses some", headers)
	}
	described := doc.HeaderNames()
	for _, h := range headers {
		if !described[h.Value] {
			t.Errorf("messages.%s (%q) is the header of no message in %s", h.Name, h.Value, asyncapitest.Path)
		}
	}
}

// fill sets every field of v (a pointer) to a value that is not zero, recursively, so
// that json.Marshal writes every field a type has.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(v.Elem())
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Uint64:
		if v.CanInt() {
			v.SetInt(3)
		} else {
			v.SetUint(3)
		}
	case reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Slice:
		if v.Type() == reflect.TypeFor[json.RawMessage]() {
			v.SetBytes([]byte(`{"a":1}`))
			return
		}
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0))
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e)
		m.SetMapIndex(reflect.ValueOf("x").Convert(v.Type().Key()), e)
		v.Set(m)
	case reflect.Interface:
		v.Set(reflect.ValueOf(map[string]any{"a": 1}))
	}
}

// filled is a value of T with every field set, then fixed by fix where a field's values
// are an enum.
func filled[T any](fix func(*T)) T {
	var v T
	fill(reflect.ValueOf(&v))
	if fix != nil {
		fix(&v)
	}
	return v
}

func fixResultError(e *messages.ResultError) { e.Code = messages.CodeToolError }

func fixCall(c *messages.ToolCall) {
	fixResultError(c.Error)
	c.Arguments = json.RawMessage(`{"path":"/tmp"}`)
}

func fixResult(r *messages.ToolResult) {
	fixResultError(r.Error)
	r.Stored.SHA256 = strings.Repeat("ab", 32)
	r.Content[0].Type, r.Content[0].Stored.SHA256 = messages.ContentImage, strings.Repeat("cd", 32)
}

func fixHealth(h *messages.HealthStatus) {
	h.State = messages.HealthUp
	h.History[0].From, h.History[0].To = messages.HealthDown, messages.HealthUp
}

// Every kind of message, built by pkg/messages' constructors and encoders (and with every
// field of its type set), fits the schema of the channel it travels on.
func TestEncodedMessagesFitTheDocument(t *testing.T) {
	doc := asyncapitest.Load(t)
	const conv = "acme.c1"
	meta := bus.Meta{ResponseID: "r1", Conversation: conv, MsgID: messages.ScopedID(conv, "r1")}
	callMeta := bus.Meta{ResponseID: "r1", Conversation: conv, MsgID: messages.CallID(conv, "r1", 1), Index: 1, Count: 3, Next: 2}

	call := messages.ToolCall{ID: messages.CallID(conv, "r1", 1), ResponseID: "r1", Conversation: conv, Index: 1, Count: 3, Next: 2,
		Tool: "read_file", Arguments: json.RawMessage(`{"path":"/tmp/a"}`), Repairs: []string{"closed a brace"}, Deadline: time.Now()}
	fullCall := filled(fixCall)
	broken := messages.ToolCall{ID: messages.CallID(conv, "r1", 0), ResponseID: "r1", Conversation: conv, Count: 1,
		Error: &messages.ResultError{Code: messages.CodeParseError, Message: "cut off"}}
	end := messages.ToolCall{ID: messages.CallID(conv, "r1", 2), ResponseID: "r1", Conversation: conv, Index: 2, Stream: true, End: true}

	ok := messages.ResultFor(call)
	ok.Success, ok.Result, ok.Attempts, ok.Backend, ok.DurationMS = true, json.RawMessage(`{"text":"hello"}`), 1, "local", 2.5
	failed := messages.ResultFor(call).Fail(messages.Errorf(messages.CodeServerUnavailable, "no answer after %d attempts", 3))
	noticed := ok
	noticed.Notice = "the call ran in a new session of its server"
	big := messages.ResultFor(messages.ToolCall{ID: messages.CallID(conv, "r1", 2), ResponseID: "r1", Conversation: conv, Index: 2, Count: 3, Tool: "big_report"})
	big.Success, big.Result = true, json.RawMessage(`"`+strings.Repeat("x", 10_000)+`"`)
	stored := big
	stored.Stored = &messages.StoredResult{Bucket: messages.ResultsBucket("acme"), Name: big.CallID, Size: len(big.Result), SHA256: sha256Hex(big.Result)}
	stored.Result = messages.Preview(big.Result, 1000, stored.Stored)
	capped := messages.CapResult(big, 4096)
	pictured := ok
	pictured.Result = json.RawMessage(`"the page:\n[image: image/png, 3 bytes, content 1]\n[resource: file:///a.pdf, application/pdf, 3 bytes, content 2]"`)
	pictured.Content = []messages.Content{{Type: messages.ContentImage, MimeType: "image/png", Data: "AAAA", Size: 3},
		{Type: messages.ContentResource, Size: 3, Stored: &messages.StoredResult{Bucket: messages.ResultsBucket("acme"), Name: ok.CallID + "/content/2", Size: 3, SHA256: strings.Repeat("ef", 32)},
			Resource: &messages.ResourceContents{URI: "file:///a.pdf", MimeType: "application/pdf"}}}
	fullResult := filled(fixResult)

	outputs := map[string]messages.Output{
		"results":     messages.RenderOutput("r1", conv, []messages.ToolResult{ok, failed, stored, noticed}),
		"content":     messages.RenderOutput("r1", conv, []messages.ToolResult{pictured, messages.CapResult(pictured, 8)}),
		"refused":     messages.RefusedOutput("r1", conv, messages.Errorf(messages.CodeNotAllowed, "the subject's conversation is not %s", "c2")),
		"no tool":     messages.NoToolCall("r1", conv),
		"internal":    messages.RenderOutput("r1", conv, []messages.ToolResult{{Tool: "t", Success: true, Result: json.RawMessage(`{bad`)}}),
		"closes text": messages.RenderOutput("r1", conv, []messages.ToolResult{{Tool: "echo", Success: true, Result: json.RawMessage(`"</tool_result>"`)}}),
	}

	dlJSON := messages.NewDeadLetter(messages.StreamCalls, 7, messages.CallSubject(conv), map[string][]string{messages.HeaderMsgID: {call.ID}},
		messages.AppendCall(nil, &call), 5, "ran out of deliveries")
	dlJSON.Answer = failed
	dlText := messages.NewDeadLetter(messages.StreamChunks, 8, messages.StreamSubject("x+y"), nil, []byte("not json"), 1, "cannot be answered: conversation")
	dlOutput := dlText
	dlOutput.Answer = outputs["refused"]
	fullDL := filled[messages.DeadLetter](nil)
	fullDL.Answer = fullResult

	type msg struct {
		name    string
		subject string
		channel string // a reply channel without an address, else ""
		header  nats.Header
		body    []byte
		output  bool
	}
	enc := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	respHeader := nats.Header{}
	for k, v := range map[string]string{messages.HeaderResponseID: "r1", messages.HeaderConversation: conv, messages.HeaderMsgID: messages.ScopedID(conv, "r1"),
		messages.HeaderFormat: "tool_call", messages.HeaderReasoning: "tagged", messages.HeaderDeadline: time.Now().UTC().Format(time.RFC3339Nano),
		messages.HeaderTraceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", messages.HeaderTracestate: "a=b"} {
		respHeader.Set(k, v)
	}
	chunkHeader := nats.Header{}
	for k, v := range respHeader {
		chunkHeader[k] = v
	}
	chunkHeader.Set(messages.HeaderChunk, "3")
	chunkHeader.Set(messages.HeaderFinal, "true")
	pipelineHeader := func(m bus.Meta) nats.Header {
		h := m.Header()
		h.Set(messages.HeaderTraceparent, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
		return h
	}

	msgs := []msg{
		{name: "response", subject: messages.ResponseSubject(conv), header: respHeader, body: []byte(`<tool_call>{"name":"clock","arguments":{}}</tool_call>`)},
		{name: "response without headers", subject: messages.ResponseSubject("c1"), body: []byte("no call")},
		{name: "chunk", subject: messages.StreamSubject(conv), header: chunkHeader, body: []byte(`{"name":`)},
		{name: "call", subject: messages.CallSubject(conv), header: callMeta.Header(), body: messages.AppendCall(nil, &call)},
		{name: "call, every field", subject: messages.CallSubject(conv), header: callMeta.Header(), body: enc(fullCall)},
		{name: "call, encoded", subject: messages.CallSubject(conv), header: callMeta.Header(), body: messages.AppendCall(nil, &fullCall)},
		{name: "call unread", subject: messages.CallSubject(conv), header: callMeta.Header(), body: messages.AppendCall(nil, &broken)},
		{name: "end of a stream", subject: messages.CallSubject(conv), header: callMeta.Header(), body: messages.AppendCall(nil, &end)},
		{name: "result", subject: messages.ResultSubject(conv), header: pipelineHeader(callMeta), body: messages.AppendResult(nil, &ok)},
		{name: "result failed", subject: messages.ResultSubject(conv), header: callMeta.Header(), body: messages.AppendResult(nil, &failed)},
		{name: "result stored", subject: messages.ResultSubject(conv), header: callMeta.Header(), body: messages.AppendResult(nil, &stored)},
		{name: "result, every field", subject: messages.ResultSubject(conv), header: callMeta.Header(), body: enc(fullResult)},
		{name: "result, encoded", subject: messages.ResultSubject(conv), header: callMeta.Header(), body: messages.AppendResult(nil, &fullResult)},
		{name: "progress", subject: messages.ProgressSubject(conv), header: bus.Meta{ResponseID: "r1", Conversation: conv, MsgID: big.CallID + "/progress", Index: 2}.Header(),
			body: messages.AppendResult(nil, &capped)},
		{name: "dead letter", subject: messages.DeadSubject(conv), header: bus.Meta{ResponseID: "r1", Conversation: conv, MsgID: "dead/TOOLBUS_CALLS/7"}.Header(), body: enc(dlJSON)},
		{name: "dead letter of text", subject: messages.DeadSubject("x+y"), header: bus.Meta{Conversation: "unknown", MsgID: "dead/TOOLBUS_STREAM/8"}.Header(), body: enc(dlOutput)},
		{name: "dead letter, every field", subject: messages.DeadSubject(conv), header: meta.Header(), body: enc(fullDL)},
		{name: "dead call", subject: messages.DeadSubject(conv), header: meta.Header(), body: enc(messages.DeadCall{Call: call, Result: failed})},
		{name: "dead call, every field", subject: messages.DeadSubject(conv), header: meta.Header(), body: enc(messages.DeadCall{Call: fullCall, Result: fullResult})},
		{name: "rejection", subject: messages.RejectedSubject(messages.StreamSubject("x+y")), header: bus.Meta{ResponseID: "r1", Conversation: "x+y"}.Header(), body: enc(dlText)},
		{name: "health", subject: messages.HealthSubject("everything"), body: enc(filled(fixHealth))},
		{name: "health kept", subject: "$KV." + messages.BucketHealth + ".everything", body: enc(messages.HealthStatus{Server: "everything", Transport: "stdio", State: messages.HealthUnknown, CheckedAt: time.Now()})},
		{name: "probe", subject: messages.ProbeSubject("everything"), body: enc(messages.ProbeRequest{Since: time.Now(), Timeout: messages.Duration(4 * time.Second)})},
		{name: "probe, every field", subject: messages.ProbeSubject("everything"), body: enc(filled[messages.ProbeRequest](nil))},
		{name: "probe answer", channel: "probeReply", body: enc(filled[messages.ProbeAnswer](nil))},
		{name: "probe answer, starting", channel: "probeReply", body: enc(messages.ProbeAnswer{Server: "everything", Executor: "executor-1", Starting: true})},
		{name: "question", subject: messages.ElicitSubject(conv), header: nats.Header{messages.HeaderConversation: {conv}},
			body: enc(filled(func(r *messages.ElicitRequest) {
				r.Mode, r.RequestedSchema = "form", json.RawMessage(`{"type":"object"}`)
			}))},
		{name: "answer", subject: messages.AnswerSubject(conv, "tok"), body: enc(filled(func(r *messages.ElicitResponse) { r.Action = "accept" }))},
		{name: "forwarded call", subject: messages.ExecSubject("executor-1"), body: messages.AppendCall(nil, &call), header: func() nats.Header {
			h := callMeta.Header()
			h.Set("Toolbus-Forwarded-Subject", messages.CallSubject(conv))
			h.Set("Toolbus-Forwarded-Delivered", "2")
			return h
		}()},
		{name: "approval request", subject: messages.ApprovalSubject(conv), header: nats.Header{messages.HeaderConversation: {conv}},
			body: enc(filled(func(r *messages.ApprovalRequest) {
				r.ID, r.ArgumentsSHA256, r.Arguments = "0123456789abcdef", strings.Repeat("ab", 32), json.RawMessage(`{"amount":500}`)
			}))},
		{name: "approval kept", subject: "$KV." + messages.BucketApprovals + ".0123456789abcdef", header: nats.Header{"Nats-Expected-Last-Subject-Sequence": {"3"}},
			body: enc(filled(func(r *messages.Approval) {
				r.ID, r.ArgumentsSHA256, r.Arguments, r.State = "0123456789abcdef", strings.Repeat("ab", 32), json.RawMessage(`"cut"`), messages.ApprovalDenied
				r.Call = call
			}))},
		{name: "ping of a holder", subject: messages.ExecSubject("executor-1"), header: nats.Header{"Toolbus-Ping": {"1"}}},
		{name: "status request", subject: messages.StatusSubject("parser")},
	}
	for name, o := range outputs {
		msgs = append(msgs,
			msg{name: "output " + name, subject: messages.OutputSubject(conv), header: meta.Header(), body: messages.AppendOutput(nil, &o), output: true},
			msg{name: "output " + name + ", json", subject: messages.OutputSubject(conv), header: meta.Header(), body: enc(o), output: true})
	}
	for _, m := range msgs {
		t.Run(m.name, func(t *testing.T) {
			var err error
			if m.channel != "" {
				err = doc.ChannelByID(m.channel).Check(m.header, m.body)
			} else {
				err = doc.Check(m.subject, m.header, m.body)
			}
			if err != nil {
				t.Error(err)
			}
			if m.output {
				if err := doc.CheckOutputText(t, m.body); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// The schemas are strict enough to tell: each of these differs from a message toolbus
// writes in one way the document does not allow, and fails.
func TestTheDocumentRefusesOtherShapes(t *testing.T) {
	doc := asyncapitest.Load(t)
	conv := "c1"
	out := messages.RenderOutput("r1", conv, []messages.ToolResult{{Tool: "clock", Success: true, Result: json.RawMessage(`{"utc":"now"}`)}})
	body := messages.AppendOutput(nil, &out)
	withResult := out
	withResult.Results = slices.Clone(out.Results)
	withResult.Results[0].Result = json.RawMessage(`{"utc":"now"}`)
	h := bus.Meta{ResponseID: "r1", Conversation: conv, MsgID: "c1/r1"}.Header()
	tests := []struct {
		name    string
		subject string
		header  nats.Header
		body    []byte
	}{
		{"a field the output does not have", messages.OutputSubject(conv), h, []byte(strings.Replace(string(body), `{"response_id"`, `{"extra":1,"response_id"`, 1))},
		{"a result inside the output's results", messages.OutputSubject(conv), h, messages.AppendOutput(nil, &withResult)},
		{"an error code pkg/messages lacks", messages.OutputSubject(conv), h, []byte(strings.Replace(string(messages.AppendOutput(nil,
			new(messages.RefusedOutput("r1", conv, messages.Errorf(messages.CodeNotAllowed, "no"))))), `"not_allowed"`, `"forbidden"`, 1))},
		{"a header toolbus does not set", messages.OutputSubject(conv), nats.Header{messages.HeaderConversation: {conv}, "Toolbus-Other": {"x"}}, body},
		{"no body", messages.OutputSubject(conv), h, nil},
		{"a subject of no channel", "toolbus.other.c1", h, body},
		{"a chunk without a number", messages.StreamSubject(conv), nats.Header{messages.HeaderResponseID: {"r1"}}, []byte("text")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := doc.Check(tt.subject, tt.header, tt.body); err == nil {
				t.Errorf("the document takes it: %s", tt.body)
			}
		})
	}
	bad := strings.Replace(string(body), `\"success\": true`, `\"success\": true,\n  \"extra\": 1`, 1)
	if err := doc.CheckOutputText(t, []byte(bad)); err == nil {
		t.Errorf("a block with a member the document does not have passes: %v", err)
	}
}
