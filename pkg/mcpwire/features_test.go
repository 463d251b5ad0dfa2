package mcpwire_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolbus/toolbus/internal/mcptest"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
)

// library is a go-sdk server with resources, a URI template, prompts, and a tool that
// answers with a resource link.
func library() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "library"}, nil)
	s.AddResource(&mcp.Resource{URI: "lib://books/dune", Name: "dune", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "A desert planet."}}}, nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "lib://shelves/{n}", Name: "shelf", Description: "a shelf by number"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{
				{URI: req.Params.URI, MIMEType: "text/plain", Text: "shelf " + strings.TrimPrefix(req.Params.URI, "lib://shelves/")},
				{URI: req.Params.URI + "/cover", MIMEType: "image/png", Blob: []byte{0x89, 'P', 'N', 'G'}},
			}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "review", Description: "Review a book.", Arguments: []*mcp.PromptArgument{{Name: "title", Required: true}, {Name: "tone"}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Description: "a review", Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: fmt.Sprintf("Review %s, %s.", req.Params.Arguments["title"], req.Params.Arguments["tone"])}},
			}}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "find"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: "found one"},
			&mcp.ResourceLink{URI: "lib://books/dune", Name: "dune"},
		}}, nil, nil
	})
	return s
}

// A server's resources and prompts reach the model as tools: listed, read (also through
// a link a tool answered with, which the result names the tool for), fetched; their
// arguments are checked before anything is sent.
func TestResourcesAndPromptsAsTools(t *testing.T) {
	srv := library()
	p := newPool(t, map[string]mcpwire.ServerConfig{"lib": placeholder}, &mcpwire.Options{Dial: inMemory(srv)})
	ctx := ctxT(t)
	names := map[string]mcpwire.Tool{}
	for _, tool := range p.Tools(ctx) {
		names[tool.Name] = tool
	}
	for _, want := range []string{"lib__find", "lib__resources_list", "lib__resources_read", "lib__prompts_list", "lib__prompts_get"} {
		if _, ok := names[want]; !ok {
			t.Fatalf("%s is not offered: %v", want, names)
		}
	}
	read := names["lib__resources_read"]
	if !read.ReadOnly || read.Destructive || !strings.Contains(read.Description, "lib://books/dune") || !strings.Contains(read.Description, "lib://shelves/{n}") {
		t.Errorf("the read tool: %+v", read)
	}
	if get := names["lib__prompts_get"]; !strings.Contains(string(get.InputSchema), `"enum":["review"]`) || !strings.Contains(get.Description, "title (required)") {
		t.Errorf("the prompt tool: %s, %s", get.InputSchema, get.Description)
	}

	calls := []struct {
		name    string
		tool    string
		args    string
		want    []string
		invalid bool
	}{
		{name: "list", tool: "lib__resources_list", want: []string{`"uri":"lib://books/dune"`, `"uriTemplate":"lib://shelves/{n}"`}},
		{name: "read text", tool: "lib__resources_read", args: `{"uri":"lib://books/dune"}`, want: []string{`"A desert planet."`}},
		{name: "read from a template", tool: "lib__resources_read", args: `{"uri":"lib://shelves/7"}`, want: []string{`shelf 7`, `lib://shelves/7/cover`}},
		{name: "a link names the read tool", tool: "lib__find", want: []string{`lib://books/dune`, `lib__resources_read`, `{\"uri\": \"lib://books/dune\"}`}},
		{name: "prompts", tool: "lib__prompts_list", want: []string{`"name":"review"`, `"required":true`}},
		{name: "a prompt", tool: "lib__prompts_get", args: `{"name":"review","arguments":{"title":"Dune","tone":"kind"}}`, want: []string{`Review Dune, kind.`, `"role":"user"`}},
		{name: "null for what is left out (OpenAI's strict mode)", tool: "lib__prompts_get", args: `{"name":"review","arguments":{"title":"Dune","tone":null}}`, want: []string{`Review Dune, .`}},
		{name: "a null cursor", tool: "lib__resources_list", args: `{"cursor":null}`, want: []string{`lib://books/dune`}},
		{name: "the qualified spelling", tool: "lib::resources:read", args: `{"uri":"lib://books/dune"}`, want: []string{`A desert planet.`}},
		{name: "no uri", tool: "lib__resources_read", args: `{}`, invalid: true},
		{name: "a number for a uri", tool: "lib__resources_read", args: `{"uri":7}`, invalid: true},
		{name: "an argument that is no string", tool: "lib__prompts_get", args: `{"name":"review","arguments":{"title":1}}`, invalid: true},
		{name: "an unknown member", tool: "lib__prompts_list", args: `{"page":2}`, invalid: true},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			out, err := p.Call(ctx, c.tool, json.RawMessage(c.args))
			if c.invalid {
				var te *messages.ToolError
				if !errors.As(err, &te) || te.Code != messages.CodeInvalidArguments {
					t.Fatalf("err = %v, want invalid_arguments", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("%s: %s lacks %s", c.tool, out, w)
				}
			}
		})
	}
	// The server's own errors are the tool's: an unknown resource, a missing prompt.
	for _, c := range []struct{ tool, args string }{
		{"lib__resources_read", `{"uri":"lib://nowhere"}`},
		{"lib__prompts_get", `{"name":"nope"}`},
	} {
		var te *mcpwire.ToolError
		if _, err := p.Call(ctx, c.tool, json.RawMessage(c.args)); !errors.As(err, &te) {
			t.Errorf("%s %s: err = %v, want a *ToolError", c.tool, c.args, err)
		}
	}

	// notifications/resources/list_changed and prompts/list_changed are followed as
	// tools/list_changed is: the descriptions name what was added.
	srv.AddResource(&mcp.Resource{URI: "lib://books/emma", Name: "emma"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "lib://books/emma", Text: "Emma."}}}, nil
	})
	eventually(t, "the new resource described", func() bool {
		tool, err := p.Lookup(ctx, "lib__resources_read")
		return err == nil && strings.Contains(tool.Description, "lib://books/emma")
	})
	srv.AddPrompt(&mcp.Prompt{Name: "summary"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Summarize."}}}}, nil
	})
	eventually(t, "the new prompt in the schema", func() bool {
		tool, err := p.Lookup(ctx, "lib__prompts_get")
		return err == nil && strings.Contains(string(tool.InputSchema), `"summary"`)
	})
}

// "resources": false and "prompts": false leave the tools out; a server without the
// capabilities gets none; a tool of the server's own keeps its name.
func TestFeatureToolsOffered(t *testing.T) {
	off := false
	plain := mcp.NewServer(&mcp.Implementation{Name: "plain"}, nil)
	mcp.AddTool(plain, &mcp.Tool{Name: "resources_read"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "mine"}}}, nil, nil
	})
	plain.AddResource(&mcp.Resource{URI: "x://a", Name: "a"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "x://a", Text: "theirs"}}}, nil
	})
	servers := map[string]*mcp.Server{"lib": library(), "plain": plain}
	p := newPool(t, map[string]mcpwire.ServerConfig{
		"lib":   {Command: "in-memory", Resources: &off, Prompts: &off},
		"plain": placeholder,
	}, &mcpwire.Options{Dial: func(ctx context.Context, name string) (mcp.Transport, error) {
		return inMemory(servers[name])(ctx, name)
	}})
	ctx := ctxT(t)
	var got []string
	for _, tool := range p.Tools(ctx) {
		got = append(got, tool.Name+"="+tool.Remote)
	}
	want := "lib__find=find plain__resources_list=resources:list plain__resources_read=resources_read plain__resources_read_"
	if s := strings.Join(got, " "); !strings.HasPrefix(s, want) || !strings.HasSuffix(s, "=resources:read") || len(got) != 4 {
		t.Fatalf("tools: %s, want %s<hash>=resources:read", s, want)
	}
	out, err := p.Call(ctx, "plain__resources_read", nil)
	if err != nil || string(out) != `"mine"` {
		t.Errorf("the server's own tool: %s, %v", out, err)
	}
	out, err = p.Call(ctx, "plain::resources:read", json.RawMessage(`{"uri":"x://a"}`))
	if err != nil || string(out) != `"theirs"` {
		t.Errorf("the feature tool: %s, %v", out, err)
	}
}

// Lists match a feature tool by its remote name, ':' as a letter: a glob of servers'
// resource tools hides those alone.
func TestFeatureToolsListed(t *testing.T) {
	p := newPool(t, map[string]mcpwire.ServerConfig{"lib": placeholder},
		&mcpwire.Options{Dial: inMemory(library()), BlockedTools: []string{"*__resources:*"}})
	var got []string
	for _, tool := range p.Tools(ctxT(t)) {
		got = append(got, tool.Name)
	}
	if s := strings.Join(got, " "); s != "lib__find lib__prompts_get lib__prompts_list" {
		t.Errorf("tools: %s", s)
	}
	if _, err := p.Lookup(ctxT(t), "lib::resources:read"); !errors.Is(err, mcpwire.ErrNotAllowed) {
		t.Errorf("lib::resources:read: %v, want not allowed", err)
	}
}

// A feature tool called before its server listed its tools (the executor's first call
// of a stdio server that is still starting) reaches the feature, not a tool of the name's
// tool part: the name is resolved again once the server has listed.
func TestFeatureToolCalledBeforeTheListing(t *testing.T) {
	srv := library()
	slow := func(ctx context.Context, name string) (mcp.Transport, error) {
		time.Sleep(200 * time.Millisecond)
		return inMemory(srv)(ctx, name)
	}
	p := newPool(t, map[string]mcpwire.ServerConfig{"lib": placeholder}, &mcpwire.Options{Dial: slow})
	out, err := p.Call(ctxT(t), "lib__resources_read", json.RawMessage(`{"uri":"lib://books/dune"}`))
	if err != nil || string(out) != `"A desert planet."` {
		t.Fatalf("= %s, %v", out, err)
	}
}

// A tool of the server's own under a feature tool's remote name (against the MCP
// specification's advice on names) is the server's: called with tools/call, no feature
// tool made in its place.
func TestFeatureNameTakenByTheServer(t *testing.T) {
	srv := library()
	mcp.AddTool(srv, &mcp.Tool{Name: "resources:read"}, func(context.Context, *mcp.CallToolRequest, struct {
		URI string `json:"uri"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "the server's own"}}}, nil, nil
	})
	p := newPool(t, map[string]mcpwire.ServerConfig{"lib": placeholder}, &mcpwire.Options{Dial: inMemory(srv)})
	out, err := p.Call(ctxT(t), "lib::resources:read", json.RawMessage(`{"uri":"lib://books/dune"}`))
	if err != nil || string(out) != `"the server's own"` {
		t.Errorf("= %s, %v", out, err)
	}
}

// The read tool shows the model a single text resource as its text, as before, and keeps
// the resource as its block (IsText), so that the front door's resources/read gives back
// its URI, type and text as they came; a blob stays a blob.
func TestReadToolKeepsTheResource(t *testing.T) {
	p := newPool(t, map[string]mcpwire.ServerConfig{"lib": placeholder}, &mcpwire.Options{Dial: inMemory(library())})
	ctx := ctxT(t)
	var kept mcpwire.KeptContent
	out, err := p.Call(mcpwire.WithKeptContent(ctx, &kept), "lib__resources_read", json.RawMessage(`{"uri":"lib://books/dune"}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `"A desert planet."` {
		t.Errorf("the model reads %s", out)
	}
	if len(kept.Content) != 1 || kept.Content[0].Resource == nil || *kept.Content[0].Resource != (messages.ResourceContents{URI: "lib://books/dune", MimeType: "text/plain", Blob: "QSBkZXNlcnQgcGxhbmV0Lg==", IsText: true}) {
		t.Errorf("kept %+v", kept.Content)
	}
	kept = mcpwire.KeptContent{}
	out, err = p.Call(mcpwire.WithKeptContent(ctx, &kept), "lib__resources_read", json.RawMessage(`{"uri":"lib://shelves/7"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "shelf 7") || !strings.Contains(string(out), "content 1]") {
		t.Errorf("the model reads %s", out)
	}
	if len(kept.Content) != 2 || kept.Content[0].Resource.IsText || kept.Content[0].Resource.MimeType != "image/png" || !kept.Content[1].Resource.IsText {
		t.Errorf("kept %+v", kept.Content)
	}
}

// "completions": true offers a tool that completes an argument of the server's prompts
// and resource templates (completion/complete), when the server declares completions;
// it is not offered without it. Naming neither or both of a prompt and a template is
// invalid_arguments, and nothing is sent.
func TestCompletionTool(t *testing.T) {
	on := true
	srv := mcptest.ConformanceServer()
	p := newPool(t, map[string]mcpwire.ServerConfig{"conf": {Command: "in-memory", Completions: &on}, "lib": {Command: "in-memory", Completions: &on}},
		&mcpwire.Options{Dial: func(ctx context.Context, name string) (mcp.Transport, error) {
			if name == "lib" {
				return inMemory(library())(ctx, name) // no completions declared
			}
			return inMemory(srv)(ctx, name)
		}})
	ctx := ctxT(t)
	if _, err := p.Lookup(ctx, "lib__completion_complete"); err == nil {
		t.Error("a server without completions has the tool")
	}
	for _, c := range []struct{ args, want string }{
		{`{"prompt":"test_prompt_with_arguments","argument":"arg1","value":"par"}`, `{"total":3,"values":["paris","park","party"]}`},
		{`{"uriTemplate":"test://template/{id}/data","argument":"id","value":"te","context":{"other":"x"}}`, `{"total":2,"values":["test","testValue1"]}`},
		{`{"prompt":"test_prompt_with_arguments","argument":"arg1","value":"zzz","uriTemplate":null}`, `{"values":[]}`},
	} {
		out, err := p.Call(ctx, "conf__completion_complete", json.RawMessage(c.args))
		if err != nil || string(out) != c.want {
			t.Errorf("%s: %s, %v; want %s", c.args, out, err, c.want)
		}
	}
	for _, args := range []string{`{"argument":"a","value":""}`, `{"prompt":"p","uriTemplate":"t","argument":"a","value":""}`, `{"prompt":"p","value":""}`} {
		var te *messages.ToolError
		if _, err := p.Call(ctx, "conf__completion_complete", json.RawMessage(args)); !errors.As(err, &te) || te.Code != messages.CodeInvalidArguments {
			t.Errorf("%s: err = %v, want invalid_arguments", args, err)
		}
	}
}

// "subscriptions": true offers the tools that subscribe a conversation to a resource and
// end it: the server's update of the resource reaches Options.Updated for the
// conversation subscribed; without the configuration, no tool.
func TestSubscriptionTools(t *testing.T) {
	on := true
	updates := make(chan messages.ResourceUpdated, 10)
	p := newPool(t, map[string]mcpwire.ServerConfig{"conf": {Command: "in-memory", Subscriptions: &on}, "plain": placeholder},
		&mcpwire.Options{Dial: func(ctx context.Context, name string) (mcp.Transport, error) {
			return inMemory(mcptest.ConformanceServer())(ctx, name)
		},
			Updated: func(_ context.Context, u messages.ResourceUpdated) { updates <- u }})
	ctx := ctxT(t)
	if _, err := p.Lookup(ctx, "plain__resources_subscribe"); err == nil {
		t.Error("a server without \"subscriptions\": true has the tool")
	}
	if tool, err := p.Lookup(ctx, "conf__resources_subscribe"); err != nil || tool.ReadOnly || !tool.Idempotent {
		t.Errorf("the subscribe tool: %+v, %v; want idempotent, not read-only", tool, err)
	}
	c1 := mcpwire.WithConversation(ctx, "c1")
	if out, err := p.Call(c1, "conf__resources_subscribe", json.RawMessage(`{"uri":"test://watched-resource"}`)); err != nil || string(out) != `{"subscribed":"test://watched-resource"}` {
		t.Fatalf("subscribe: %s, %v", out, err)
	}
	select {
	case u := <-updates: // the server updates the watched resource at once
		if u != (messages.ResourceUpdated{Conversation: "c1", Server: "conf", URI: "test://watched-resource"}) {
			t.Errorf("update %+v", u)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no update of the subscribed resource")
	}
	if out, err := p.Call(c1, "conf__resources_unsubscribe", json.RawMessage(`{"uri":"test://watched-resource"}`)); err != nil || string(out) != `{"unsubscribed":"test://watched-resource"}` {
		t.Errorf("unsubscribe: %s, %v", out, err)
	}
	var te *messages.ToolError
	if _, err := p.Call(c1, "conf__resources_subscribe", json.RawMessage(`{}`)); !errors.As(err, &te) || te.Code != messages.CodeInvalidArguments {
		t.Errorf("no uri: %v", err)
	}
}
