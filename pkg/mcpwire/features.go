package mcpwire

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolcall"
)

// A model reaches a server's resources and prompts as it reaches tools: toolbus offers,
// for each server that declares the capability, four tools of its own making (the
// feature tools). Their remote names are MCP's methods with ':' for '/' — a character
// the MCP specification leaves out of tool names (SEP-986) and that globs match like a
// letter — so that they never meet a tool of the server's own in the catalog's
// (server, tool) pairs, in routes or in allow- and block-lists ("everything__resources:*").
// The name a model sees is made as any tool's ([catalog.ExposedName]): ':' becomes '_',
// "everything__resources_read". Should the server also list a tool that is shown by that
// name, its tool keeps the name and the feature tool's ends in a hash (the catalog's
// Distinct rule; the feature tools come after the server's own).
const (
	remoteListResources = "resources:list"
	remoteReadResource  = "resources:read"
	remoteListPrompts   = "prompts:list"
	remoteGetPrompt     = "prompts:get"
	// Those offered when the configuration asks for them ("completions": true,
	// "subscriptions": true).
	remoteComplete    = "completion:complete"
	remoteSubscribe   = "resources:subscribe"
	remoteUnsubscribe = "resources:unsubscribe"
)

// featureMeta marks, in its _meta, a tool the pool made ([server.feature]).
const featureMeta = "toolbus/feature"

// feature reports whether tool, as the server's listing has it, is a feature tool the
// pool made: not a tool of the server's own that happens to be called "resources:read".
func (s *server) feature(tool string) bool {
	if featureMethod(tool) == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tools {
		if t != nil && t.Name == tool {
			return t.Meta[featureMeta] == true
		}
	}
	return true // not listed yet: the name can only be the pool's
}

// featureMethod is the MCP method a feature tool sends, or "" for a tool of the server's.
func featureMethod(remote string) string {
	switch remote {
	case remoteListResources, remoteReadResource, remoteListPrompts, remoteGetPrompt, remoteComplete, remoteSubscribe, remoteUnsubscribe:
		return strings.Replace(remote, ":", "/", 1)
	}
	return ""
}

// Bounds of what the feature tools list and name.
const (
	// maxListed bounds the entries one list call returns; a longer list ends in a
	// cursor the model passes back.
	maxListed = 200
	// maxNamed bounds the resources, templates and prompts a description names.
	maxNamed = 20
	// maxPromptEnum bounds the prompt names the get tool's schema enumerates.
	maxPromptEnum = 100
)

// features is what a server offers beside tools, as its shared session last listed it.
type features struct {
	resources bool
	prompts   bool
	// Some of them, for the descriptions: the first page of each list.
	someResources []*mcp.Resource
	templates     []*mcp.ResourceTemplate
	somePrompts   []*mcp.Prompt
	morePrompts   bool
	// completions: the server completes arguments, and the configuration offers it;
	// subscriptions: likewise for subscriptions to its resources.
	completions, subscriptions bool
}

// listFeatures reads what sess's server offers beside tools. A list that fails leaves
// the feature offered, described without examples: the server declared it.
func (s *server) listFeatures(ctx context.Context, sess session) features {
	ms, ok := sess.(*mcpSession)
	if !ok {
		return features{}
	}
	r := ms.cs.InitializeResult()
	if r == nil || r.Capabilities == nil {
		return features{}
	}
	var f features
	if r.Capabilities.Resources != nil && s.cfg.OffersResources() {
		f.resources = true
		if res, err := ms.cs.ListResources(ctx, &mcp.ListResourcesParams{}); err == nil {
			f.someResources = res.Resources
		} else {
			s.log.Debug("resources/list", "err", err)
		}
		if res, err := ms.cs.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{}); err == nil {
			f.templates = res.ResourceTemplates
		} else {
			s.log.Debug("resources/templates/list", "err", err)
		}
	}
	if r.Capabilities.Prompts != nil && s.cfg.OffersPrompts() {
		f.prompts = true
		if res, err := ms.cs.ListPrompts(ctx, &mcp.ListPromptsParams{}); err == nil {
			f.somePrompts, f.morePrompts = res.Prompts, res.NextCursor != ""
		} else {
			s.log.Debug("prompts/list", "err", err)
		}
	}
	f.completions = r.Capabilities.Completions != nil && s.cfg.OffersCompletions() && (f.resources || f.prompts)
	f.subscriptions = f.resources && r.Capabilities.Resources.Subscribe && s.cfg.OffersSubscriptions()
	return f
}

// featureTools are the feature tools of sess's server, listed after its own tools (own):
// on a name both would be shown by, the server's tool keeps it (the catalog's Distinct
// rule), and a tool of its own under a feature tool's remote name leaves that one out.
func (s *server) featureTools(ctx context.Context, sess session, own []*mcp.Tool) []*mcp.Tool {
	taken := make(map[string]bool, len(own))
	for _, t := range own {
		if t != nil {
			taken[t.Name] = true
		}
	}
	return offeredTools(s.name, s.cfg.Prefix, s.listFeatures(ctx, sess), taken)
}

// offeredTools are the tools that reach what f offers, as a server would list them,
// but for those whose remote names own takes.
func offeredTools(server, prefix string, f features, own map[string]bool) []*mcp.Tool {
	name := func(remote string) string { return catalog.ExposedName(server, prefix, remote) }
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(bool)}
	var out []*mcp.Tool
	add := func(t *mcp.Tool) {
		if !own[t.Name] {
			if t.Annotations == nil {
				t.Annotations = readOnly
			}
			t.Meta = mcp.Meta{featureMeta: true}
			out = append(out, t)
		}
	}
	if f.resources {
		var b strings.Builder
		fmt.Fprintf(&b, "Read a resource of the MCP server %q by its URI: one that %s lists, one filled in from a URI template, or one a tool's result links to (a resource_link). The result is the resource's contents.", server, name(remoteListResources))
		describeResources(&b, f)
		add(&mcp.Tool{Name: remoteReadResource, Title: "Read a resource of " + server, Description: b.String(), InputSchema: json.RawMessage(readResourceSchema)})
		add(&mcp.Tool{Name: remoteListResources, Title: "List the resources of " + server,
			Description: fmt.Sprintf("List the resources of the MCP server %q (documents, files and data it offers to read): each one's uri, name, description and mimeType, and the URI templates it fills in. Read one with %s. A list that goes on ends in nextCursor: pass it as cursor for the rest.", server, name(remoteReadResource)),
			InputSchema: json.RawMessage(listSchema)})
	}
	if f.prompts {
		var b strings.Builder
		fmt.Fprintf(&b, "Get a prompt of the MCP server %q: the messages of a prompt template it offers, filled in with the arguments given (strings).", server)
		describePrompts(&b, f, name(remoteListPrompts))
		add(&mcp.Tool{Name: remoteGetPrompt, Title: "Get a prompt of " + server, Description: b.String(), InputSchema: getPromptSchema(f)})
		add(&mcp.Tool{Name: remoteListPrompts, Title: "List the prompts of " + server,
			Description: fmt.Sprintf("List the prompts of the MCP server %q: each one's name, description and arguments. Get one with %s. A list that goes on ends in nextCursor: pass it as cursor for the rest.", server, name(remoteGetPrompt)),
			InputSchema: json.RawMessage(listSchema)})
	}
	if f.completions {
		add(&mcp.Tool{Name: remoteComplete, Title: "Complete an argument of " + server,
			Description: fmt.Sprintf("Complete an argument of a prompt or a resource template of the MCP server %q: the values it suggests for what was typed so far (value), given the arguments already chosen (context). Name the prompt (prompt) or the URI template (uriTemplate).", server),
			InputSchema: json.RawMessage(completeSchema)})
	}
	if f.subscriptions {
		// They change what the conversation is told, not the server's data: idempotent,
		// not read-only.
		idempotent := &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: new(bool), OpenWorldHint: new(bool)}
		add(&mcp.Tool{Name: remoteSubscribe, Title: "Subscribe to a resource of " + server, Annotations: idempotent,
			Description: fmt.Sprintf("Subscribe this conversation to a resource of the MCP server %q by its URI: each update of it reaches the conversation's orchestrator. End it with %s.", server, name(remoteUnsubscribe)),
			InputSchema: json.RawMessage(readResourceSchema)})
		add(&mcp.Tool{Name: remoteUnsubscribe, Title: "End a subscription to a resource of " + server, Annotations: idempotent,
			Description: fmt.Sprintf("End this conversation's subscription to a resource of the MCP server %q, made with %s.", server, name(remoteSubscribe)),
			InputSchema: json.RawMessage(readResourceSchema)})
	}
	return out
}

func describeResources(b *strings.Builder, f features) {
	if len(f.someResources) > 0 {
		b.WriteString(" Resources include:")
		for i, r := range f.someResources[:min(len(f.someResources), maxNamed)] {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(b, " %s", r.URI)
			if r.Name != "" && r.Name != r.URI {
				fmt.Fprintf(b, " (%s)", r.Name)
			}
		}
		b.WriteString(".")
	}
	if len(f.templates) > 0 {
		b.WriteString(" URI templates:")
		for i, t := range f.templates[:min(len(f.templates), maxNamed)] {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(b, " %s", t.URITemplate)
			if t.Description != "" {
				fmt.Fprintf(b, " (%s)", strings.TrimSuffix(t.Description, "."))
			}
		}
		b.WriteString(".")
	}
}

func describePrompts(b *strings.Builder, f features, list string) {
	if len(f.somePrompts) == 0 {
		fmt.Fprintf(b, " %s names them.", list)
		return
	}
	b.WriteString(" Prompts:")
	for i, p := range f.somePrompts[:min(len(f.somePrompts), maxNamed)] {
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(b, " %s", p.Name)
		var args []string
		for _, a := range p.Arguments {
			if a.Required {
				args = append(args, a.Name+" (required)")
			} else {
				args = append(args, a.Name)
			}
		}
		if len(args) > 0 {
			fmt.Fprintf(b, " [arguments: %s]", strings.Join(args, ", "))
		}
		if p.Description != "" {
			fmt.Fprintf(b, ": %s", strings.TrimSuffix(p.Description, "."))
		}
	}
	b.WriteString(".")
	if f.morePrompts || len(f.somePrompts) > maxNamed {
		fmt.Fprintf(b, " %s names the others.", list)
	}
}

const (
	listSchema         = `{"type":"object","properties":{"cursor":{"type":"string","description":"where the previous list stopped (its nextCursor)"}},"additionalProperties":false}`
	readResourceSchema = `{"type":"object","properties":{"uri":{"type":"string","minLength":1,"description":"the resource's URI"}},"required":["uri"],"additionalProperties":false}`
	completeSchema     = `{"type":"object","properties":{` +
		`"prompt":{"type":"string","description":"the prompt whose argument is completed"},` +
		`"uriTemplate":{"type":"string","description":"or the resource template whose variable is completed"},` +
		`"argument":{"type":"string","minLength":1,"description":"the argument's (or the variable's) name"},` +
		`"value":{"type":"string","description":"what was typed so far"},` +
		`"context":{"type":"object","additionalProperties":{"type":"string"},"description":"the arguments already chosen, by name"}},` +
		`"required":["argument","value"],"additionalProperties":false}`
)

// getPromptSchema is the get tool's input schema. When the first page of the list held
// every prompt, the names are an enum and the arguments are properties (each prompt's,
// all optional: which a prompt requires its description says), which OpenAI's strict
// mode can express; else the arguments are any strings by name.
func getPromptSchema(f features) json.RawMessage {
	name := map[string]any{"type": "string", "minLength": 1, "description": "the prompt's name"}
	args := map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}, "description": "the prompt's arguments by name"}
	if !f.morePrompts && len(f.somePrompts) > 0 && len(f.somePrompts) <= maxPromptEnum {
		var names []string
		props := map[string]any{}
		takers := map[string][]string{}
		for _, p := range f.somePrompts {
			names = append(names, p.Name)
			for _, a := range p.Arguments {
				takers[a.Name] = append(takers[a.Name], p.Name)
				if _, ok := props[a.Name]; !ok {
					props[a.Name] = map[string]any{"type": "string", "description": a.Description}
				}
			}
		}
		for arg, prompts := range takers {
			d := props[arg].(map[string]any)
			d["description"] = strings.TrimSpace("of " + strings.Join(prompts, ", ") + ". " + d["description"].(string))
		}
		name["enum"] = names
		args = map[string]any{"type": "object", "properties": props, "additionalProperties": false, "description": "the prompt's arguments by name"}
	}
	schema := map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"name": name, "arguments": args},
		"required":             []string{"name"},
		"additionalProperties": false,
	}
	b, _ := json.Marshal(schema)
	return b
}

// The schemas a feature tool's arguments are checked against before anything is sent:
// the exposed ones' fixed parts, taking null where a property may be left out (OpenAI's
// strict mode writes a property left out as null) and any prompt argument (one added
// since the catalog was made is still asked for).
const (
	checkListSchema      = `{"type":"object","properties":{"cursor":{"type":["string","null"]}},"additionalProperties":false}`
	checkGetPromptSchema = `{"type":"object","properties":{"name":{"type":"string","minLength":1},"arguments":{"type":["object","null"],"additionalProperties":{"type":["string","null"]}}},"required":["name"],"additionalProperties":false}`
	checkCompleteSchema  = `{"type":"object","properties":{"prompt":{"type":["string","null"]},"uriTemplate":{"type":["string","null"]},` +
		`"argument":{"type":"string","minLength":1},"value":{"type":"string"},"context":{"type":["object","null"],"additionalProperties":{"type":["string","null"]}}},` +
		`"required":["argument","value"],"additionalProperties":false}`
)

// featureArgs are the arguments of a feature tool, as [decodeFeatureArgs] reads them.
type featureArgs struct {
	Cursor    *string            `json:"cursor"`
	URI       string             `json:"uri"`
	Name      string             `json:"name"`
	Arguments map[string]*string `json:"arguments"`
	// The completion tool's.
	Prompt      *string            `json:"prompt"`
	URITemplate *string            `json:"uriTemplate"`
	Argument    string             `json:"argument"`
	Value       string             `json:"value"`
	Context     map[string]*string `json:"context"`
}

// completeParams are the completion tool's arguments as completion/complete asks: the
// prompt or the template named, not both.
func (a featureArgs) completeParams(tool string) (*mcp.CompleteParams, error) {
	p := &mcp.CompleteParams{Argument: mcp.CompleteParamsArgument{Name: a.Argument, Value: a.Value}}
	prompt, template := a.Prompt != nil && *a.Prompt != "", a.URITemplate != nil && *a.URITemplate != ""
	switch {
	case prompt && !template:
		p.Ref = &mcp.CompleteReference{Type: "ref/prompt", Name: *a.Prompt}
	case template && !prompt:
		p.Ref = &mcp.CompleteReference{Type: "ref/resource", URI: *a.URITemplate}
	default:
		return nil, messages.Errorf(messages.CodeInvalidArguments, "invalid arguments for tool %q: name either a prompt or a uriTemplate", messages.EchoName(tool))
	}
	if ctx := nonNull(a.Context); len(ctx) > 0 {
		p.Context = &mcp.CompleteContext{Arguments: ctx}
	}
	return p, nil
}

// promptArguments are the arguments given, without those left out as null.
func (a featureArgs) promptArguments() map[string]string { return nonNull(a.Arguments) }

// nonNull are the strings of m by name, without those left out as null.
func nonNull(m map[string]*string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if v != nil {
			out[k] = *v
		}
	}
	return out
}

func (a featureArgs) cursor() string {
	if a.Cursor == nil {
		return ""
	}
	return *a.Cursor
}

// featureSchemas are the fixed parts every feature tool's arguments are checked against,
// whatever the description's enum said (a prompt added since is still asked for).
var featureSchemas = sync.OnceValue(func() map[string]*jsonschema.Resolved {
	out := map[string]*jsonschema.Resolved{}
	for remote, raw := range map[string]string{
		remoteListResources: checkListSchema, remoteListPrompts: checkListSchema, remoteReadResource: readResourceSchema,
		remoteGetPrompt: checkGetPromptSchema, remoteComplete: checkCompleteSchema,
		remoteSubscribe: readResourceSchema, remoteUnsubscribe: readResourceSchema,
	} {
		s, err := toolcall.ResolveSchema(json.RawMessage(raw))
		if err != nil {
			panic(fmt.Sprintf("the schema of %s: %v", remote, err))
		}
		out[remote] = s
	}
	return out
})

// withFeatureSchemas adds the feature tools' input schemas to a server's declared ones,
// so that a call's arguments are checked before anything is sent, as a declared tool's
// are ([Pool.CallTool]).
func withFeatureSchemas(declared map[string]*jsonschema.Resolved) map[string]*jsonschema.Resolved {
	out := make(map[string]*jsonschema.Resolved, len(declared)+4)
	for remote, schema := range featureSchemas() {
		out[remote] = schema
	}
	for name, schema := range declared {
		out[name] = schema // a declared tool of that name: the server's own
	}
	return out
}

// decodeFeatureArgs checks a feature tool's arguments (a JSON object; empty is {})
// against its schema and reads them: an invalid one is an invalid_arguments error
// naming what is wrong, and nothing is sent.
func decodeFeatureArgs(tool, remote string, raw json.RawMessage) (featureArgs, error) {
	schema, ok := featureSchemas()[remote]
	if !ok {
		return featureArgs{}, fmt.Errorf("%w: %q is no feature tool", ErrUnknownTool, remote)
	}
	checked, err := toolcall.CheckArguments(tool, schema, raw)
	if err != nil {
		return featureArgs{}, err
	}
	var a featureArgs
	if err := json.Unmarshal(checked, &a); err != nil {
		return featureArgs{}, messages.Errorf(messages.CodeInvalidArguments, "invalid arguments for tool %q: %v", messages.EchoName(tool), err)
	}
	if remote == remoteComplete {
		if _, err := a.completeParams(tool); err != nil {
			return featureArgs{}, err
		}
	}
	return a, nil
}

// callFeature runs a feature tool on sess: the MCP request its remote name stands for,
// its answer as a tool's result.
func (s *mcpSession) callFeature(ctx context.Context, remote string, a featureArgs) (*mcp.CallToolResult, error) {
	ctx, stop := boundTo(ctx, s.life)
	defer stop()
	res, err := s.feature(ctx, remote, a)
	if err != nil && ctx.Err() == nil && s.life.Err() != nil {
		return nil, fmt.Errorf("%w: the session was closed during the call", errConnection)
	}
	return res, err
}

func (s *mcpSession) feature(ctx context.Context, remote string, a featureArgs) (*mcp.CallToolResult, error) {
	switch remote {
	case remoteReadResource:
		res, err := s.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: a.URI, Meta: traceMeta(ctx)})
		if err != nil {
			return nil, err
		}
		return resourceResult(res), nil
	case remoteGetPrompt:
		res, err := s.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: a.Name, Arguments: a.promptArguments(), Meta: traceMeta(ctx)})
		if err != nil {
			return nil, err
		}
		return structured(struct {
			Description string               `json:"description,omitempty"`
			Messages    []*mcp.PromptMessage `json:"messages"`
		}{res.Description, res.Messages})
	case remoteListResources:
		var out struct {
			Resources  []*mcp.Resource         `json:"resources"`
			Templates  []*mcp.ResourceTemplate `json:"resourceTemplates,omitempty"`
			NextCursor string                  `json:"nextCursor,omitempty"`
		}
		out.Resources = []*mcp.Resource{}
		cursor := a.cursor()
		for page := 0; page < maxPages; page++ {
			res, err := s.cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
			if err != nil {
				return nil, err
			}
			out.Resources = append(out.Resources, res.Resources...)
			if cursor = res.NextCursor; cursor == "" || len(out.Resources) >= maxListed {
				break
			}
		}
		out.NextCursor = cursor
		if a.cursor() == "" {
			res, err := s.cs.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{})
			if err == nil {
				out.Templates = res.ResourceTemplates
			} else if !isMethodNotFound(err) {
				return nil, err
			}
		}
		return structured(out)
	case remoteComplete:
		p, err := a.completeParams(remote)
		if err != nil {
			return nil, err
		}
		p.Meta = traceMeta(ctx)
		res, err := s.cs.Complete(ctx, p)
		if err != nil {
			return nil, err
		}
		if res.Completion.Values == nil {
			res.Completion.Values = []string{}
		}
		return structured(res.Completion)
	case remoteSubscribe:
		if err := s.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: a.URI, Meta: traceMeta(ctx)}); err != nil {
			return nil, err
		}
		return structured(map[string]any{"subscribed": a.URI})
	case remoteUnsubscribe:
		if err := s.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: a.URI, Meta: traceMeta(ctx)}); err != nil {
			return nil, err
		}
		return structured(map[string]any{"unsubscribed": a.URI})
	case remoteListPrompts:
		var out struct {
			Prompts    []*mcp.Prompt `json:"prompts"`
			NextCursor string        `json:"nextCursor,omitempty"`
		}
		out.Prompts = []*mcp.Prompt{}
		cursor := a.cursor()
		for page := 0; page < maxPages; page++ {
			res, err := s.cs.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: cursor})
			if err != nil {
				return nil, err
			}
			out.Prompts = append(out.Prompts, res.Prompts...)
			if cursor = res.NextCursor; cursor == "" || len(out.Prompts) >= maxListed {
				break
			}
		}
		out.NextCursor = cursor
		return structured(out)
	}
	return nil, fmt.Errorf("%w: %q is no feature tool", ErrUnknownTool, remote)
}

// resourceResult is a resource's contents as a tool's result: each an embedded resource,
// as it came ([readValue] shows the model a single text as it is).
func resourceResult(res *mcp.ReadResourceResult) *mcp.CallToolResult {
	out := &mcp.CallToolResult{Content: make([]mcp.Content, 0, len(res.Contents))}
	for _, c := range res.Contents {
		if c != nil {
			out.Content = append(out.Content, &mcp.EmbeddedResource{Resource: c})
		}
	}
	return out
}

// readValue is resultValue for the read tool's result (resourceResult): the text of a
// single text resource as it is (a blob whose type is text and whose bytes are UTF-8
// counts as one), its resource kept as its block (for the front door's resources/read,
// which gives back the contents as they came); anything else as any tool's embedded
// resources are.
func readValue(server, tool string, res *mcp.CallToolResult) (json.RawMessage, []messages.Content, string, error) {
	if res != nil && !res.IsError && len(res.Content) == 1 {
		if e, ok := res.Content[0].(*mcp.EmbeddedResource); ok && e.Resource != nil {
			r := e.Resource
			text, ok := r.Text, r.Blob == nil
			if !ok && textual(r.MIMEType) && utf8.Valid(r.Blob) {
				text, ok = string(r.Blob), true
			}
			if ok {
				value, _, _, err := resultValue(server, tool, &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}})
				return value, []messages.Content{resourceBlock(r)}, "", err
			}
		}
	}
	return resultValue(server, tool, res)
}

// textual reports whether a MIME type is text a model reads: text/*, JSON, XML.
func textual(mime string) bool {
	mime, _, _ = strings.Cut(mime, ";")
	mime = strings.TrimSpace(strings.ToLower(mime))
	return strings.HasPrefix(mime, "text/") || mime == "application/json" || mime == "application/xml" ||
		strings.HasSuffix(mime, "+json") || strings.HasSuffix(mime, "+xml")
}

func structured(v any) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{StructuredContent: json.RawMessage(b)}, nil
}

// linkNote adds to a result with resource links a text block that names the tool that
// reads them, when the catalog offers it.
func (p *Pool) linkNote(server string, res *mcp.CallToolResult) {
	if res == nil || res.IsError {
		return
	}
	var uris []string
	for _, c := range res.Content {
		if l, ok := c.(*mcp.ResourceLink); ok {
			uris = append(uris, l.URI)
		}
	}
	if len(uris) == 0 {
		return
	}
	for _, t := range p.catalog.Load().Tools() {
		if t.Server == server && t.Remote == remoteReadResource {
			res.Content = append(res.Content, &mcp.TextContent{Text: fmt.Sprintf("The resource links above are read with the tool %s, e.g. {\"uri\": %q}.", t.Name, uris[0])})
			return
		}
	}
}

// guessed reports whether t was made of a qualified name alone, its server not having
// listed its tools yet, and waits (up to ctx) for that server's first connection
// attempt, which lists them. The guess takes the name's tool part for the server's name
// of the tool, which a feature tool's is not ("everything__resources_read" is
// "resources:read"); the server's calls would wait for that attempt anyway.
func (p *Pool) guessed(ctx context.Context, t Tool) bool {
	s, ok := p.server(t.Server)
	if !ok || isDone(s.tried) {
		return false
	}
	s.mu.Lock()
	listed := s.listed
	s.mu.Unlock()
	if listed {
		return false
	}
	select {
	case <-s.tried:
		return true
	case <-ctx.Done():
		return false
	}
}
