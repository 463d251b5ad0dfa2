package dialect

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolcall"
)

// Further APIs whose next turn [Turn] writes (their declarations are OpenAI's or not
// written).
const (
	// OpenAIResponses: OpenAI's Responses API, whose input takes function_call_output items.
	OpenAIResponses Dialect = "openai_responses"
	// Bedrock: Amazon Bedrock's Converse API.
	Bedrock Dialect = "bedrock"
	// Ollama: Ollama's /api/chat.
	Ollama Dialect = "ollama"
)

// OutputDialects lists the APIs [Turn] writes: the hosted APIs whose responses toolbus
// reads (toolcall.APIFormats), one list for both.
func OutputDialects() []Dialect {
	fs := toolcall.APIFormats()
	ds := make([]Dialect, len(fs))
	for i, f := range fs {
		ds[i] = Dialect(f)
	}
	return ds
}

// ParseOutput returns the output dialect named s (any case, spaces around), or an error
// listing them.
func ParseOutput(s string) (Dialect, error) {
	f, err := toolcall.ParseOutputFormat(strings.ToLower(strings.TrimSpace(s)))
	if err == nil && f == "" {
		_, err = toolcall.ParseOutputFormat("none")
	}
	if err != nil {
		return "", err
	}
	return Dialect(f), nil
}

// Turn writes the next turn of API d that answers results (in call order): a JSON array
// of exactly what the orchestrator appends to its next request's list (messages, input
// or contents), each result answering its call by [messages.ToolResult.ModelID]:
//
//   - openai: a {"role":"tool"} message per result; the images of the results, which a
//     tool message cannot hold, follow in one user message.
//   - openai_responses: a function_call_output item per result, its output the text, or
//     text and images in the output's list form.
//   - anthropic: one user message of tool_result blocks (is_error on a failure).
//   - gemini: one user content of functionResponse parts, the images in the
//     functionResponse's own parts.
//   - bedrock: one user message of toolResult blocks (status success or error), a result
//     that is a JSON object as a json block.
//   - ollama: a {"role":"tool"} message per result, its images in "images".
//
// A result's text is its value, compacted, or on a failure {"error": message,
// "error_code": code}; its notice follows as a text of its own (after a blank line where
// the API takes one string). A result that is not valid JSON is null. Images go to the
// APIs that take them when their data is inline and of a type the API accepts; the others
// stay named in the result's text only, as every content block is.
func Turn(d Dialect, results []messages.ToolResult) (json.RawMessage, error) {
	answers := make([]answer, len(results))
	for i := range results {
		answers[i] = answerOf(&results[i])
	}
	var out any
	switch d {
	case OpenAI:
		out = openAITurn(answers)
	case OpenAIResponses:
		out = responsesTurn(answers)
	case Anthropic:
		out = anthropicTurn(answers)
	case Gemini:
		out = geminiTurn(answers)
	case Bedrock:
		out = bedrockTurn(answers)
	case Ollama:
		out = ollamaTurn(answers)
	default:
		_, err := toolcall.ParseOutputFormat(string(d))
		if err == nil {
			err = fmt.Errorf("unknown output format %q", d)
		}
		return nil, fmt.Errorf("no next turn: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// answer is one result as every API's turn reads it.
type answer struct {
	id, tool string
	failed   bool
	// value is the result's JSON, compacted (null when missing or invalid); text is what
	// the model reads: value, or the failure's error object.
	value json.RawMessage
	text  string
	// code and message are a failure's.
	code, message string
	notice        string
	content       []messages.Content
}

// errorText is a failure as the model reads it: toolbus's error code stays in it.
type errorText struct {
	Error     string             `json:"error"`
	ErrorCode messages.ErrorCode `json:"error_code"`
}

func answerOf(r *messages.ToolResult) answer {
	a := answer{id: r.ModelID, tool: r.Tool, notice: r.Notice, content: r.Content, value: json.RawMessage("null")}
	var buf bytes.Buffer
	if len(r.Result) > 0 && json.Valid(r.Result) && json.Compact(&buf, r.Result) == nil {
		a.value = buf.Bytes()
	}
	if r.Success {
		a.text = string(a.value)
		return a
	}
	a.failed = true
	if r.Error != nil {
		a.code, a.message = string(r.Error.Code), r.Error.Message
	} else {
		a.code, a.message = string(messages.CodeInternal), "the call failed without a reason"
	}
	a.text = marshalString(errorText{Error: a.message, ErrorCode: messages.ErrorCode(a.code)})
	return a
}

// joined is the text and the notice as one string, for the APIs that take one.
func (a *answer) joined() string {
	if a.notice == "" {
		return a.text
	}
	return a.text + "\n\n" + a.notice
}

// image is an inline image of a result that an API accepts.
type image struct {
	mime, data string
	// name is how the result's text names it ([messages.ContentName]).
	name string
}

func (i image) dataURL() string { return "data:" + i.mime + ";base64," + i.data }

// The image types each API takes inline (the others stay named in the text).
var (
	// OpenAI, Anthropic, Bedrock: Anthropic's and Bedrock's lists (Base64ImageSource,
	// ImageFormat), which are also OpenAI's (a GIF not animated). Ollama's models read
	// the same.
	commonImages = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}
	// Gemini's image understanding.
	geminiImages = map[string]bool{"image/jpeg": true, "image/png": true, "image/webp": true, "image/heic": true, "image/heif": true}
)

// images returns the result's images of the types in allowed whose data is inline and
// valid base64 (padded, as every API wants it).
func (a *answer) images(allowed map[string]bool) []image {
	var out []image
	for i := range a.content {
		c := &a.content[i]
		mime := strings.ToLower(strings.TrimSpace(c.MimeOf()))
		if mime == "image/jpg" {
			mime = "image/jpeg"
		}
		if !allowed[mime] || c.Inline() == "" {
			continue
		}
		data := c.Inline()
		if _, err := base64.StdEncoding.DecodeString(data); err != nil {
			raw, err := c.Decode()
			if err != nil {
				continue
			}
			data = base64.StdEncoding.EncodeToString(raw)
		}
		out = append(out, image{mime: mime, data: data, name: messages.ContentName(*c, i+1)})
	}
	return out
}

// vendorName is the name a vendor's API declared the tool by ([catalog.VendorNames]), for
// the APIs that answer a call by name.
func vendorName(tool string) string {
	if tool == "" {
		return tool
	}
	return catalog.VendorNames([]string{tool})[tool]
}

func marshalString(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "null"
	}
	return strings.TrimRight(buf.String(), "\n")
}

// OpenAI Chat Completions.

type openAIText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type openAIToolMessage struct {
	Role       string `json:"role"`
	ToolCallID string `json:"tool_call_id"`
	// Content is a string, or text parts when a notice follows the result.
	Content any `json:"content"`
}

type openAIUserMessage struct {
	Role    string `json:"role"`
	Content []any  `json:"content"`
}

type openAIImagePart struct {
	Type     string         `json:"type"`
	ImageURL openAIImageURL `json:"image_url"`
}

type openAIImageURL struct {
	URL string `json:"url"`
}

func openAITurn(answers []answer) []any {
	out := make([]any, 0, len(answers)+1)
	var images []any
	for i := range answers {
		a := &answers[i]
		m := openAIToolMessage{Role: "tool", ToolCallID: a.id, Content: a.text}
		if a.notice != "" {
			m.Content = []openAIText{{Type: "text", Text: a.text}, {Type: "text", Text: a.notice}}
		}
		out = append(out, m)
		for _, img := range a.images(commonImages) {
			images = append(images,
				openAIText{Type: "text", Text: fmt.Sprintf("%s of call %s (%s):", img.name, a.id, a.tool)},
				openAIImagePart{Type: "image_url", ImageURL: openAIImageURL{URL: img.dataURL()}})
		}
	}
	if len(images) > 0 {
		// A tool message holds text only: the images come after, as the user's.
		content := append([]any{openAIText{Type: "text", Text: "The images the tool calls returned, each after the name its result gives it:"}}, images...)
		out = append(out, openAIUserMessage{Role: "user", Content: content})
	}
	return out
}

// OpenAI Responses.

type responsesOutput struct {
	Type   string `json:"type"`
	CallID string `json:"call_id"`
	// Output is a string, or a list of input_text and input_image items.
	Output any `json:"output"`
}

type responsesImage struct {
	Type     string `json:"type"`
	ImageURL string `json:"image_url"`
}

func responsesTurn(answers []answer) []any {
	out := make([]any, 0, len(answers))
	for i := range answers {
		a := &answers[i]
		item := responsesOutput{Type: "function_call_output", CallID: a.id, Output: a.text}
		images := a.images(commonImages)
		if a.notice != "" || len(images) > 0 {
			list := []any{openAIText{Type: "input_text", Text: a.text}}
			if a.notice != "" {
				list = append(list, openAIText{Type: "input_text", Text: a.notice})
			}
			for _, img := range images {
				list = append(list, responsesImage{Type: "input_image", ImageURL: img.dataURL()})
			}
			item.Output = list
		}
		out = append(out, item)
	}
	return out
}

// Anthropic Messages.

type anthropicToolResult struct {
	Type      string `json:"type"`
	ToolUseID string `json:"tool_use_id"`
	Content   []any  `json:"content"`
	IsError   bool   `json:"is_error,omitempty"`
}

type anthropicImage struct {
	Type   string                `json:"type"`
	Source anthropicBase64Source `json:"source"`
}

type anthropicBase64Source struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

type roleContent struct {
	Role    string `json:"role"`
	Content []any  `json:"content"`
}

func anthropicTurn(answers []answer) []any {
	if len(answers) == 0 {
		return []any{}
	}
	blocks := make([]any, 0, len(answers))
	for i := range answers {
		a := &answers[i]
		content := []any{openAIText{Type: "text", Text: a.text}}
		if a.notice != "" {
			content = append(content, openAIText{Type: "text", Text: a.notice})
		}
		for _, img := range a.images(commonImages) {
			content = append(content, anthropicImage{Type: "image", Source: anthropicBase64Source{Type: "base64", MediaType: img.mime, Data: img.data}})
		}
		blocks = append(blocks, anthropicToolResult{Type: "tool_result", ToolUseID: a.id, Content: content, IsError: a.failed})
	}
	return []any{roleContent{Role: "user", Content: blocks}}
}

// Gemini.

type geminiContent struct {
	Role  string       `json:"role"`
	Parts []geminiPart `json:"parts"`
}

type geminiPart struct {
	FunctionResponse geminiFunctionResponse `json:"functionResponse"`
}

type geminiFunctionResponse struct {
	ID       string `json:"id,omitempty"`
	Name     string `json:"name"`
	Response any    `json:"response"`
	// Parts carry the images (FunctionResponsePart), which the response's text names.
	Parts []geminiInline `json:"parts,omitempty"`
}

type geminiOutput struct {
	Output json.RawMessage `json:"output"`
	Notice string          `json:"notice,omitempty"`
}

type geminiFailure struct {
	Error  geminiError `json:"error"`
	Notice string      `json:"notice,omitempty"`
}

type geminiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type geminiInline struct {
	InlineData geminiBlob `json:"inlineData"`
}

type geminiBlob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

func geminiTurn(answers []answer) []any {
	if len(answers) == 0 {
		return []any{}
	}
	parts := make([]geminiPart, 0, len(answers))
	for i := range answers {
		a := &answers[i]
		fr := geminiFunctionResponse{ID: a.id, Name: vendorName(a.tool)}
		if a.failed {
			fr.Response = geminiFailure{Error: geminiError{Code: a.code, Message: a.message}, Notice: a.notice}
		} else {
			fr.Response = geminiOutput{Output: a.value, Notice: a.notice}
		}
		for _, img := range a.images(geminiImages) {
			fr.Parts = append(fr.Parts, geminiInline{InlineData: geminiBlob{MimeType: img.mime, Data: img.data}})
		}
		parts = append(parts, geminiPart{FunctionResponse: fr})
	}
	return []any{geminiContent{Role: "user", Parts: parts}}
}

// Bedrock Converse.

type bedrockBlock struct {
	ToolResult bedrockToolResult `json:"toolResult"`
}

type bedrockToolResult struct {
	ToolUseID string `json:"toolUseId"`
	Content   []any  `json:"content"`
	Status    string `json:"status"`
}

type bedrockJSON struct {
	JSON json.RawMessage `json:"json"`
}

type bedrockText struct {
	Text string `json:"text"`
}

type bedrockImage struct {
	Image bedrockImageBlock `json:"image"`
}

type bedrockImageBlock struct {
	Format string             `json:"format"`
	Source bedrockImageSource `json:"source"`
}

// bedrockImageSource's bytes are base64, as the Converse API's JSON carries a blob.
type bedrockImageSource struct {
	Bytes string `json:"bytes"`
}

func bedrockTurn(answers []answer) []any {
	if len(answers) == 0 {
		return []any{}
	}
	blocks := make([]any, 0, len(answers))
	for i := range answers {
		a := &answers[i]
		tr := bedrockToolResult{ToolUseID: a.id, Status: "success"}
		if a.failed {
			tr.Status = "error"
		}
		if !a.failed && len(a.value) > 0 && a.value[0] == '{' {
			tr.Content = append(tr.Content, bedrockJSON{JSON: a.value})
		} else {
			tr.Content = append(tr.Content, bedrockText{Text: a.text})
		}
		if a.notice != "" {
			tr.Content = append(tr.Content, bedrockText{Text: a.notice})
		}
		for _, img := range a.images(commonImages) {
			tr.Content = append(tr.Content, bedrockImage{Image: bedrockImageBlock{Format: strings.TrimPrefix(img.mime, "image/"), Source: bedrockImageSource{Bytes: img.data}}})
		}
		blocks = append(blocks, bedrockBlock{ToolResult: tr})
	}
	return []any{roleContent{Role: "user", Content: blocks}}
}

// Ollama /api/chat.

type ollamaMessage struct {
	Role     string   `json:"role"`
	ToolName string   `json:"tool_name"`
	Content  string   `json:"content"`
	Images   []string `json:"images,omitempty"`
}

func ollamaTurn(answers []answer) []any {
	out := make([]any, 0, len(answers))
	for i := range answers {
		a := &answers[i]
		m := ollamaMessage{Role: "tool", ToolName: vendorName(a.tool), Content: a.joined()}
		for _, img := range a.images(commonImages) {
			m.Images = append(m.Images, img.data)
		}
		out = append(out, m)
	}
	return out
}
