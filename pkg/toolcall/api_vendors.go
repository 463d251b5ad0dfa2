package toolcall

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/toolbus/toolbus/pkg/jsonscan"
)

// The readers of each API's responses and streaming events, as the vendors' API
// references and official SDKs define them (pkg/toolcall/testdata/api/README.md cites
// them).

// OpenAI Chat Completions, and Ollama's /api/chat, whose messages are shaped alike.

type oaFunction struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

type oaToolCall struct {
	Index    *int       `json:"index"`
	ID       string     `json:"id"`
	Type     string     `json:"type"`
	Function oaFunction `json:"function"`
}

type oaMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	Refusal          *string         `json:"refusal"`
	ReasoningContent *string         `json:"reasoning_content"` // vLLM, SGLang, DeepSeek
	Reasoning        *string         `json:"reasoning"`         // OpenRouter, vLLM's newer
	Thinking         *string         `json:"thinking"`          // Ollama
	ToolCalls        []oaToolCall    `json:"tool_calls"`
	FunctionCall     *oaFunction     `json:"function_call"`
}

type oaChoice struct {
	Index        int        `json:"index"`
	Message      *oaMessage `json:"message"`
	Delta        *oaMessage `json:"delta"`
	FinishReason *string    `json:"finish_reason"`
}

type oaResponse struct {
	Choices []oaChoice `json:"choices"`
	Message *oaMessage `json:"message"` // Ollama
	Done    *bool      `json:"done"`    // Ollama
}

// openAIWhole reads a chat.completion (its first choice), an Ollama response, or an
// assistant message.
func (r *apiReader) openAIWhole(v string) error {
	var resp oaResponse
	if err := decodeInto(v, &resp, apiName(r.format)+" response"); err != nil {
		return err
	}
	switch {
	case resp.Choices != nil:
		if c := firstChoice(resp.Choices); c != nil && c.Message != nil {
			r.message(c.Message, true, "")
		}
	case resp.Message != nil:
		r.message(resp.Message, true, "")
	default:
		var m oaMessage
		if err := decodeInto(v, &m, apiName(r.format)+" message"); err != nil {
			return err
		}
		r.message(&m, true, "")
	}
	return nil
}

// firstChoice is the choice of index 0: a request for several choices gets the first
// one's calls run.
func firstChoice(cs []oaChoice) *oaChoice {
	for i := range cs {
		if cs[i].Index == 0 {
			return &cs[i]
		}
	}
	return nil
}

// message reads an assistant message or a stream's delta of one. Whole messages'
// calls are complete (done); a delta's calls are keyed by their index, their
// arguments' fragments appended, and a call is complete once the next one starts.
func (r *apiReader) message(m *oaMessage, whole bool, _ string) {
	for _, s := range []*string{m.ReasoningContent, m.Reasoning, m.Thinking} {
		if s != nil {
			r.appendText(apiReasoning, *s)
		}
	}
	r.appendText(apiText, contentText(m.Content))
	if m.Refusal != nil {
		r.appendText(apiText, *m.Refusal)
	}
	for i, tc := range m.ToolCalls {
		if whole {
			r.call(tc.ID, tc.Function.Name, tc.Function.Arguments, true)
			continue
		}
		idx := i
		if tc.Index != nil {
			idx = *tc.Index
		}
		r.delta("tc"+strconv.Itoa(idx), tc.ID, tc.Function.Name, tc.Function.Arguments)
	}
	if fc := m.FunctionCall; fc != nil {
		if whole {
			r.call("", fc.Name, fc.Arguments, true)
		} else {
			r.delta("fc", "", fc.Name, fc.Arguments)
		}
	}
}

// delta adds a streamed call's part: its start (id, name) or its arguments' next
// fragment (a JSON string; an object replaces them whole).
func (r *apiReader) delta(key, id, name string, args json.RawMessage) {
	b := r.find(key)
	if b != nil && id != "" && b.id != "" && id != b.id {
		// A new id at the same index (or with none): another call. vLLM and LiteLLM
		// put every parallel call at index 0; Gemini's OpenAI-compatible endpoint
		// sends calls whole without an index.
		b = nil
	}
	if b == nil {
		for _, prev := range r.blocks {
			// The calls before a new one are complete: OpenAI streams a response's
			// calls one after another. Only arguments that read as a whole JSON object
			// settle so; others (an OpenAI-compatible server's broken JSON) wait for the
			// finish reason, when nothing more can come.
			if prev.kind == apiCall && (prev.hasArgs || wholeObject(string(prev.text))) {
				prev.done = true
			}
		}
		b = r.call(id, name, nil, false)
		b.key, b.fromText = key, true
	}
	if b.id == "" {
		b.id = id
	}
	if b.name == "" {
		b.name = name
	}
	b.end = r.atEnd
	args = json.RawMessage(strings.TrimSpace(string(args)))
	if len(args) == 0 || string(args) == "null" {
		return
	}
	if args[0] != '"' {
		b.setArgs(args)
		return
	}
	var frag string
	if json.Unmarshal(args, &frag) == nil {
		b.text = append(b.text, frag...)
		b.hasArgs = false
	}
}

// wholeObject reports whether s is one whole JSON object (or nothing: no arguments).
func wholeObject(s string) bool {
	t := strings.TrimSpace(s)
	if t == "" {
		return true
	}
	end, res := jsonscan.Value(t, 0, DefaultMaxDepth, jsonscan.Strict)
	return res == jsonscan.OK && end == len(t) && t[0] == '{'
}

// contentText is a message's content: a string, or the text of its text parts.
func contentText(c json.RawMessage) string {
	c = json.RawMessage(strings.TrimSpace(string(c)))
	if len(c) == 0 {
		return ""
	}
	switch c[0] {
	case '"':
		return str(c)
	case '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		_ = json.Unmarshal(c, &parts)
		var b strings.Builder
		for _, p := range parts {
			if p.Type == "text" || p.Type == "output_text" {
				b.WriteString(p.Text)
			}
		}
		return b.String()
	}
	return ""
}

// openAIEvent reads a chat.completion.chunk (or a whole completion in a stream).
func (r *apiReader) openAIEvent(v string) error {
	var resp oaResponse
	if err := decodeInto(v, &resp, "chat.completion.chunk"); err != nil {
		return err
	}
	c := firstChoice(resp.Choices)
	if c == nil {
		return nil // usage, or another choice's
	}
	switch {
	case c.Delta != nil:
		r.message(c.Delta, false, "")
	case c.Message != nil:
		r.message(c.Message, true, "")
	}
	if c.FinishReason != nil && *c.FinishReason != "" {
		r.finished = true
	}
	return nil
}

// ollamaEvent reads one NDJSON chunk of a streamed /api/chat: its calls come whole.
func (r *apiReader) ollamaEvent(v string) error {
	var resp oaResponse
	if err := decodeInto(v, &resp, "Ollama chunk"); err != nil {
		return err
	}
	if resp.Message != nil {
		r.message(resp.Message, true, "")
	}
	if resp.Done != nil && *resp.Done {
		r.finished = true
	}
	return nil
}

// OpenAI Responses.

type rsPart struct {
	Type    string `json:"type"`
	Text    string `json:"text"`
	Refusal string `json:"refusal"`
}

type rsItem struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Content   []rsPart        `json:"content"`
	Summary   []rsPart        `json:"summary"`
}

// responsesWhole reads a response object, its output list, or one item.
func (r *apiReader) responsesWhole(v string) error {
	var items []rsItem
	switch {
	case strings.HasPrefix(v, "["):
		if err := decodeInto(v, &items, "Responses output list"); err != nil {
			return err
		}
	default:
		var resp struct {
			Object string   `json:"object"`
			Output []rsItem `json:"output"`
			rsItem
		}
		if err := decodeInto(v, &resp, "Responses response"); err != nil {
			return err
		}
		if resp.Object == "response" || resp.Output != nil {
			items = resp.Output
		} else {
			items = []rsItem{resp.rsItem}
		}
	}
	for i := range items {
		r.responsesItem(&items[i], true)
	}
	return nil
}

// responsesItem reads one output item; a function_call is a call, messages are content,
// reasoning is reasoning, the built-in tools' items are the vendor's.
func (r *apiReader) responsesItem(it *rsItem, text bool) *apiBlock {
	switch it.Type {
	case "function_call":
		return r.call(it.CallID, it.Name, it.Arguments, true)
	case "message":
		if text {
			for _, p := range it.Content {
				r.appendText(apiText, p.Text+p.Refusal)
			}
		}
	case "reasoning":
		if text {
			for _, p := range append(it.Summary, it.Content...) {
				r.appendText(apiReasoning, p.Text)
			}
		}
	default:
		r.add(apiOther)
	}
	return nil
}

// responsesEvent reads one of the response.* streaming events.
func (r *apiReader) responsesEvent(v string) error {
	var ev struct {
		Type        string          `json:"type"`
		OutputIndex *int            `json:"output_index"`
		ItemID      string          `json:"item_id"`
		Item        *rsItem         `json:"item"`
		Delta       json.RawMessage `json:"delta"`
		Arguments   json.RawMessage `json:"arguments"`
		Name        string          `json:"name"`
	}
	if err := decodeInto(v, &ev, "Responses event"); err != nil {
		return err
	}
	key := "o"
	if ev.OutputIndex != nil {
		key += strconv.Itoa(*ev.OutputIndex)
	} else {
		key += ev.ItemID
	}
	switch ev.Type {
	case "response.output_item.added", "response.output_item.done":
		if ev.Item == nil || ev.Item.Type != "function_call" {
			return nil // text and reasoning come by their deltas
		}
		b := r.find(key)
		if b == nil {
			b = r.call(ev.Item.CallID, ev.Item.Name, nil, false)
			b.key, b.fromText = key, true
		}
		if ev.Item.CallID != "" {
			b.id = ev.Item.CallID
		}
		if ev.Item.Name != "" {
			b.name = ev.Item.Name
		}
		if ev.Type == "response.output_item.done" {
			b.setArgs(ev.Item.Arguments)
			b.done = true
		}
		b.end = r.atEnd
	case "response.function_call_arguments.delta":
		if b := r.find(key); b != nil {
			var frag string
			if json.Unmarshal(ev.Delta, &frag) == nil {
				b.text = append(b.text, frag...)
			}
			b.end = r.atEnd
		}
	case "response.function_call_arguments.done":
		if b := r.find(key); b != nil {
			b.setArgs(ev.Arguments)
			if ev.Name != "" {
				b.name = ev.Name
			}
			b.done, b.end = true, r.atEnd
		}
	case "response.output_text.delta", "response.refusal.delta":
		r.appendText(apiText, str(ev.Delta))
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		r.appendText(apiReasoning, str(ev.Delta))
	case "response.completed", "response.incomplete", "response.failed":
		r.finished = true
	}
	return nil
}

// Anthropic Messages.

type anBlock struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	Thinking string          `json:"thinking"`
	ID       string          `json:"id"`
	Name     string          `json:"name"`
	Input    json.RawMessage `json:"input"`
}

// anthropicWhole reads a message, or its content array.
func (r *apiReader) anthropicWhole(v string) error {
	var blocks []anBlock
	if strings.HasPrefix(v, "[") {
		if err := decodeInto(v, &blocks, "Anthropic content"); err != nil {
			return err
		}
	} else {
		var m struct {
			Content []anBlock `json:"content"`
		}
		if err := decodeInto(v, &m, "Anthropic message"); err != nil {
			return err
		}
		blocks = m.Content
	}
	for i := range blocks {
		r.anthropicBlock(&blocks[i], true, "")
	}
	return nil
}

func (r *apiReader) anthropicBlock(b *anBlock, whole bool, key string) {
	switch b.Type {
	case "text":
		r.appendText(apiText, b.Text)
	case "thinking":
		r.appendText(apiReasoning, b.Thinking)
	case "tool_use":
		c := r.call(b.ID, b.Name, b.Input, whole)
		c.key = key
	default:
		r.add(apiOther).key = key // server tools' blocks, redacted thinking
	}
}

// anthropicEvent reads one streaming event.
func (r *apiReader) anthropicEvent(v string) error {
	var ev struct {
		Type         string   `json:"type"`
		Index        int      `json:"index"`
		ContentBlock *anBlock `json:"content_block"`
		Delta        struct {
			Type        string `json:"type"`
			Text        string `json:"text"`
			Thinking    string `json:"thinking"`
			PartialJSON string `json:"partial_json"`
			StopReason  string `json:"stop_reason"`
		} `json:"delta"`
		Message *struct {
			Content []anBlock `json:"content"`
		} `json:"message"`
	}
	if err := decodeInto(v, &ev, "Anthropic event"); err != nil {
		return err
	}
	key := "b" + strconv.Itoa(ev.Index)
	switch ev.Type {
	case "message_start":
		if ev.Message != nil {
			for i := range ev.Message.Content {
				r.anthropicBlock(&ev.Message.Content[i], true, "")
			}
		}
	case "content_block_start":
		if ev.ContentBlock != nil {
			r.anthropicBlock(ev.ContentBlock, false, key)
		}
	case "content_block_delta":
		switch ev.Delta.Type {
		case "text_delta":
			r.appendText(apiText, ev.Delta.Text)
		case "thinking_delta":
			r.appendText(apiReasoning, ev.Delta.Thinking)
		case "input_json_delta":
			if b := r.find(key); b != nil && b.kind == apiCall {
				if b.hasArgs {
					// The start's input ({}) is replaced by the streamed one.
					b.hasArgs, b.args, b.fromText = false, "", true
				}
				b.text = append(b.text, ev.Delta.PartialJSON...)
				b.end = r.atEnd
			}
		}
	case "content_block_stop":
		if b := r.find(key); b != nil {
			b.done, b.end = true, r.atEnd
		}
	case "message_delta":
		if ev.Delta.StopReason != "" {
			r.finished = true
		}
	case "message_stop":
		r.finished = true
	}
	return nil
}

// Gemini.

type gmCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
	// Vertex AI's streamed arguments (streamFunctionCallArguments): the call's first
	// chunk names it, WillContinue set; the next carry PartialArgs; an empty one ends it.
	WillContinue bool        `json:"willContinue"`
	PartialArgs  []gmPartial `json:"partialArgs"`
}

// gmPartial is a piece of a streamed argument: its path, and a value (a string's pieces
// join).
type gmPartial struct {
	JSONPath     string          `json:"jsonPath"`
	StringValue  *string         `json:"stringValue"`
	NumberValue  json.RawMessage `json:"numberValue"`
	BoolValue    json.RawMessage `json:"boolValue"`
	NullValue    json.RawMessage `json:"nullValue"`
	WillContinue bool            `json:"willContinue"`
}

type gmPart struct {
	Text          *string `json:"text"`
	Thought       bool    `json:"thought"`
	FunctionCall  *gmCall `json:"functionCall"`
	FunctionCall2 *gmCall `json:"function_call"` // the Python SDK's model_dump
}

type gmContent struct {
	Role  string   `json:"role"`
	Parts []gmPart `json:"parts"`
}

// geminiWhole reads a GenerateContentResponse (its first candidate; each chunk of a
// stream is one), a Content, or its parts.
func (r *apiReader) geminiWhole(v string) error {
	var parts []gmPart
	if strings.HasPrefix(v, "[") {
		if err := decodeInto(v, &parts, "Gemini parts"); err != nil {
			return err
		}
	} else {
		var resp struct {
			Candidates []struct {
				Content      gmContent `json:"content"`
				FinishReason string    `json:"finishReason"`
				FinishSnake  string    `json:"finish_reason"`
				Index        int       `json:"index"`
			} `json:"candidates"`
			gmContent
		}
		if err := decodeInto(v, &resp, "Gemini response"); err != nil {
			return err
		}
		parts = resp.Parts
		if resp.Candidates != nil {
			parts = nil
			for _, c := range resp.Candidates {
				if c.Index == 0 {
					parts = c.Content.Parts
					if c.FinishReason != "" || c.FinishSnake != "" {
						r.finished = true
					}
					break
				}
			}
		}
	}
	for _, p := range parts {
		fc := p.FunctionCall
		if fc == nil {
			fc = p.FunctionCall2
		}
		switch {
		case fc != nil && r.partial != nil:
			if err := r.geminiPartial(fc); err != nil {
				return err
			}
		case fc != nil && fc.WillContinue && len(fc.Args) == 0:
			b := r.call(fc.ID, fc.Name, nil, false)
			b.fromText, b.args, b.hasArgs, b.open = true, "", false, true
			r.partial = b
			r.partialArgs = nil
		case fc != nil:
			r.call(fc.ID, fc.Name, fc.Args, true)
		case p.Text != nil && p.Thought:
			r.appendText(apiReasoning, *p.Text)
		case p.Text != nil:
			r.appendText(apiText, *p.Text)
		default:
			r.add(apiOther)
		}
	}
	return nil
}

// geminiPartial adds a chunk of a call whose arguments Vertex AI streams: its pieces,
// or, without WillContinue, its end. Arguments are rebuilt as an object of the paths
// given ($.a, $.a.b); a path of another form (an array's index) fails the call.
func (r *apiReader) geminiPartial(fc *gmCall) error {
	b := r.partial
	b.end = r.atEnd
	if r.cutting {
		b.cut = true // the event that would end or extend it was cut
	}
	for _, p := range fc.PartialArgs {
		keys, ok := strings.CutPrefix(p.JSONPath, "$.")
		if !ok || keys == "" || strings.ContainsAny(keys, "[]") {
			b.cut = true // never run: arguments it cannot rebuild
			continue
		}
		var v json.RawMessage
		switch {
		case p.StringValue != nil:
			prev := r.partialArgs.get(keys)
			var s string
			if len(prev) > 0 && prev[0] == '"' {
				_ = json.Unmarshal(prev, &s)
			}
			v, _ = json.Marshal(s + *p.StringValue)
		case len(p.NumberValue) > 0:
			v = p.NumberValue
		case len(p.BoolValue) > 0:
			v = p.BoolValue
		default:
			v = json.RawMessage("null")
		}
		r.partialArgs = r.partialArgs.set(keys, v)
	}
	if !fc.WillContinue && len(fc.PartialArgs) == 0 {
		b.args, b.hasArgs, b.done, b.open = string(r.partialArgs.object()), true, true, false
		r.partial = nil
		return nil
	}
	b.args, b.hasArgs = string(r.partialArgs.object()), true
	return nil
}

// pathArgs are streamed arguments by path ("a.b"), in the order first given.
type pathArgs []struct {
	path string
	v    json.RawMessage
}

func (a pathArgs) get(path string) json.RawMessage {
	for _, e := range a {
		if e.path == path {
			return e.v
		}
	}
	return nil
}

func (a pathArgs) set(path string, v json.RawMessage) pathArgs {
	for i := range a {
		if a[i].path == path {
			a[i].v = v
			return a
		}
	}
	return append(a, struct {
		path string
		v    json.RawMessage
	}{path, v})
}

// object writes the arguments as a JSON object, nesting the dotted paths.
func (a pathArgs) object() []byte {
	type node struct {
		keys []string
		sub  map[string]*node
		v    json.RawMessage
	}
	root := &node{sub: map[string]*node{}}
	for _, e := range a {
		n := root
		for _, k := range strings.Split(e.path, ".") {
			c, ok := n.sub[k]
			if !ok {
				c = &node{sub: map[string]*node{}}
				n.sub[k] = c
				n.keys = append(n.keys, k)
			}
			n = c
		}
		n.v = e.v
	}
	var write func(n *node, b []byte) []byte
	write = func(n *node, b []byte) []byte {
		if len(n.keys) == 0 && n.v != nil {
			return append(b, n.v...)
		}
		b = append(b, '{')
		for i, k := range n.keys {
			if i > 0 {
				b = append(b, ',')
			}
			kb, _ := json.Marshal(k)
			b = append(append(b, kb...), ':')
			b = write(n.sub[k], b)
		}
		return append(b, '}')
	}
	return write(root, nil)
}

// Bedrock Converse.

type brBlock struct {
	Text    *string `json:"text"`
	ToolUse *struct {
		ToolUseID string          `json:"toolUseId"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
		Type      string          `json:"type"` // "server_tool_use": a system tool Bedrock ran
	} `json:"toolUse"`
	ReasoningContent *struct {
		ReasoningText *struct {
			Text string `json:"text"`
		} `json:"reasoningText"`
	} `json:"reasoningContent"`
}

// bedrockWhole reads a Converse response, its message, or its content.
func (r *apiReader) bedrockWhole(v string) error {
	var blocks []brBlock
	if strings.HasPrefix(v, "[") {
		if err := decodeInto(v, &blocks, "Bedrock content"); err != nil {
			return err
		}
	} else {
		type message struct {
			Content []brBlock `json:"content"`
		}
		var resp struct {
			Output *struct {
				Message message `json:"message"`
			} `json:"output"`
			message
		}
		if err := decodeInto(v, &resp, "Bedrock response"); err != nil {
			return err
		}
		blocks = resp.Content
		if resp.Output != nil {
			blocks = resp.Output.Message.Content
		}
	}
	for _, b := range blocks {
		switch {
		case b.ToolUse != nil && b.ToolUse.Type == "server_tool_use":
			r.add(apiOther)
		case b.ToolUse != nil:
			r.call(b.ToolUse.ToolUseID, b.ToolUse.Name, b.ToolUse.Input, true)
		case b.Text != nil:
			r.appendText(apiText, *b.Text)
		case b.ReasoningContent != nil && b.ReasoningContent.ReasoningText != nil:
			r.appendText(apiReasoning, b.ReasoningContent.ReasoningText.Text)
		default:
			r.add(apiOther)
		}
	}
	return nil
}

// bedrockEvent reads one ConverseStream event ({"contentBlockStart": {…}}, …).
func (r *apiReader) bedrockEvent(v string) error {
	var ev struct {
		ContentBlockStart *struct {
			Start struct {
				ToolUse *struct {
					ToolUseID string `json:"toolUseId"`
					Name      string `json:"name"`
					Type      string `json:"type"`
				} `json:"toolUse"`
			} `json:"start"`
			Index int `json:"contentBlockIndex"`
		} `json:"contentBlockStart"`
		ContentBlockDelta *struct {
			Delta struct {
				Text    *string `json:"text"`
				ToolUse *struct {
					Input string `json:"input"`
				} `json:"toolUse"`
				ReasoningContent *struct {
					Text string `json:"text"`
				} `json:"reasoningContent"`
			} `json:"delta"`
			Index int `json:"contentBlockIndex"`
		} `json:"contentBlockDelta"`
		ContentBlockStop *struct {
			Index int `json:"contentBlockIndex"`
		} `json:"contentBlockStop"`
		MessageStop json.RawMessage `json:"messageStop"`
	}
	if err := decodeInto(v, &ev, "Bedrock event"); err != nil {
		return err
	}
	switch {
	case ev.ContentBlockStart != nil:
		if tu := ev.ContentBlockStart.Start.ToolUse; tu != nil && tu.Type != "server_tool_use" {
			b := r.call(tu.ToolUseID, tu.Name, nil, false)
			b.key, b.fromText = "b"+strconv.Itoa(ev.ContentBlockStart.Index), true
		}
	case ev.ContentBlockDelta != nil:
		d := ev.ContentBlockDelta.Delta
		switch {
		case d.ToolUse != nil:
			if b := r.find("b" + strconv.Itoa(ev.ContentBlockDelta.Index)); b != nil {
				b.text = append(b.text, d.ToolUse.Input...)
				b.end = r.atEnd
			}
		case d.Text != nil:
			r.appendText(apiText, *d.Text)
		case d.ReasoningContent != nil:
			r.appendText(apiReasoning, d.ReasoningContent.Text)
		}
	case ev.ContentBlockStop != nil:
		if b := r.find("b" + strconv.Itoa(ev.ContentBlockStop.Index)); b != nil {
			b.done, b.end = true, r.atEnd
		}
	case len(ev.MessageStop) > 0:
		r.finished = true
	}
	return nil
}
