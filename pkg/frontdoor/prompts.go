package frontdoor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nuid"

	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/messages"
)

// The remote names of the tools toolbus makes of a server's prompts, and of its
// completions (docs/mcp.md).
const (
	promptsList = "prompts:list"
	promptsGet  = "prompts:get"
	complete    = "completion:complete"
)

// features answers prompts/list, prompts/get, resources/list,
// resources/templates/list, resources/read and completion/complete for tenant's clients
// with the backends' prompts and resources, through the pipeline: the servers' feature
// tools the tenant is offered (<server>__prompts_list, __prompts_get, __resources_list,
// __resources_read, __completion_complete) run as any call does (policy, sessions of the
// conversation). Each is named at the door as
// its server names it where no other server offers one so named, else
// "<server>__<name>" ([doorNames]). Every other method goes on to next.
func (d *Door) features(tenant string) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch r := req.(type) {
			case *mcp.ListPromptsRequest:
				return d.listPrompts(ctx, tenant, r)
			case *mcp.GetPromptRequest:
				return d.getPrompt(ctx, tenant, r)
			case *mcp.ListResourcesRequest:
				return d.listResources(ctx, tenant, r)
			case *mcp.ListResourceTemplatesRequest:
				return d.listResourceTemplates(ctx, tenant, r)
			case *mcp.ReadResourceRequest:
				return d.readResource(ctx, tenant, r)
			case *mcp.CompleteRequest:
				return d.complete(ctx, tenant, r)
			}
			return next(ctx, method, req)
		}
	}
}

// owned is something a server offers under a name of its own: a prompt, a resource, a
// resource template.
type owned struct{ server, name string }

// doorNames are the names the door gives what the servers offer: the server's own name
// where no other server offers one so named, else "<server>__<name>", as a tool's bare
// name works where it is unique.
func doorNames(items []owned) []string {
	servers := map[string]map[string]bool{}
	for _, it := range items {
		if servers[it.name] == nil {
			servers[it.name] = map[string]bool{}
		}
		servers[it.name][it.server] = true
	}
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.name
		if len(servers[it.name]) > 1 {
			out[i] = it.server + "__" + it.name
		}
	}
	return out
}

// promptTools are tenant's tools of remote name remote, by server.
func (d *Door) promptTools(tenant, remote string) map[string]catalog.Tool {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]catalog.Tool{}
	if ts := d.servers[tenant]; ts != nil {
		for _, t := range ts.tools {
			if t.Remote == remote && t.Server != "" {
				out[t.Server] = t
			}
		}
	}
	return out
}

// runFeature runs a feature tool for a request of session and returns its result's
// value, or an error saying why there is none.
func (d *Door) runFeature(ctx context.Context, tenant string, ss *mcp.ServerSession, extra *mcp.RequestExtra, tool string, args any) (json.RawMessage, error) {
	r, err := d.runFeatureResult(ctx, tenant, ss, extra, tool, args)
	if err != nil {
		return nil, err
	}
	return r.Result, nil
}

// runFeatureResult is runFeature's whole result, its value read whole when it was stored.
func (d *Door) runFeatureResult(ctx context.Context, tenant string, ss *mcp.ServerSession, extra *mcp.RequestExtra, tool string, args any) (*messages.OutputResult, error) {
	conv, _, err := d.conversation(tenant, ss, extra)
	if err != nil {
		return nil, err
	}
	return d.runFeatureIn(ctx, conv, tool, args)
}

// runFeatureIn is runFeatureResult in conversation conv.
func (d *Door) runFeatureIn(ctx context.Context, conv, tool string, args any) (*messages.OutputResult, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, d.o.CallTimeout)
	defer cancel()
	// Read-only: a retry may run it again, so each is a response of its own.
	r, err := d.run(ctx, conv, "mcp-"+nuid.Next(), tool, b)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, fmt.Errorf("%s: no result", tool)
	}
	if !r.Success {
		return nil, &featureError{tool: tool, code: r.Error.Code, msg: r.Error.Message}
	}
	if r.Stored != nil {
		whole, err := d.client.FetchResult(ctx, r.Stored)
		if err != nil {
			return nil, err
		}
		r.Result, r.Stored = whole, nil
	}
	return r, nil
}

// featureError is a feature tool's failure, as the pipeline answered it.
type featureError struct {
	tool string
	code messages.ErrorCode
	msg  string
}

func (e *featureError) Error() string { return fmt.Sprintf("%s: %s: %s", e.tool, e.code, e.msg) }

// serverPrompt is a prompt as its server lists it.
type serverPrompt struct {
	server string
	prompt *mcp.Prompt
}

// serverPrompts lists the prompts of the servers whose prompts tenant is offered (each
// server's first page), in the order of the servers' names.
func (d *Door) serverPrompts(ctx context.Context, tenant string, ss *mcp.ServerSession, extra *mcp.RequestExtra) []serverPrompt {
	tools := d.promptTools(tenant, promptsList)
	var out []serverPrompt
	for _, server := range slices.Sorted(maps.Keys(tools)) {
		value, err := d.runFeature(ctx, tenant, ss, extra, tools[server].Name, map[string]any{})
		if err != nil {
			d.o.Logger.Warn("mcp: a server's prompts are not listed", "server", server, "err", err)
			continue
		}
		var listed struct {
			Prompts []*mcp.Prompt `json:"prompts"`
		}
		if err := json.Unmarshal(value, &listed); err != nil {
			d.o.Logger.Warn("mcp: a server's prompts are not listed", "server", server, "err", err)
			continue
		}
		for _, p := range listed.Prompts {
			if p != nil {
				out = append(out, serverPrompt{server, p})
			}
		}
	}
	return out
}

func promptNames(prompts []serverPrompt) []string {
	items := make([]owned, len(prompts))
	for i, p := range prompts {
		items[i] = owned{p.server, p.prompt.Name}
	}
	return doorNames(items)
}

func (d *Door) listPrompts(ctx context.Context, tenant string, req *mcp.ListPromptsRequest) (*mcp.ListPromptsResult, error) {
	prompts := d.serverPrompts(ctx, tenant, req.Session, req.Extra)
	res := &mcp.ListPromptsResult{Prompts: []*mcp.Prompt{}}
	for i, name := range promptNames(prompts) {
		p := prompts[i].prompt
		p.Name = name
		res.Prompts = append(res.Prompts, p)
	}
	return res, nil
}

// promptOwner is the server and the name there of the prompt a client names: as
// prompts/list names it, or "<server>__<name>" whatever the list says.
func (d *Door) promptOwner(ctx context.Context, tenant string, ss *mcp.ServerSession, extra *mcp.RequestExtra, name string) (server, prompt string, err error) {
	if s, p, ok := strings.Cut(name, "__"); ok {
		if _, offered := d.promptTools(tenant, promptsGet)[s]; offered {
			return s, p, nil
		}
	}
	prompts := d.serverPrompts(ctx, tenant, ss, extra)
	for i, n := range promptNames(prompts) {
		if n == name {
			return prompts[i].server, prompts[i].prompt.Name, nil
		}
	}
	return "", "", fmt.Errorf("no prompt %q among the prompts of the servers offered", name)
}

func (d *Door) getPrompt(ctx context.Context, tenant string, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	server, name, err := d.promptOwner(ctx, tenant, req.Session, req.Extra, req.Params.Name)
	if err != nil {
		return nil, err
	}
	tool, offered := d.promptTools(tenant, promptsGet)[server]
	if !offered {
		return nil, fmt.Errorf("no prompt %q: the prompts of %s are not offered", req.Params.Name, server)
	}
	args := map[string]any{"name": name}
	if len(req.Params.Arguments) > 0 {
		args["arguments"] = req.Params.Arguments
	}
	value, err := d.runFeature(ctx, tenant, req.Session, req.Extra, tool.Name, args)
	if err != nil {
		return nil, err
	}
	var res mcp.GetPromptResult
	if err := json.Unmarshal(value, &res); err != nil {
		return nil, fmt.Errorf("%s: %w", req.Params.Name, err)
	}
	if res.Messages == nil {
		res.Messages = []*mcp.PromptMessage{}
	}
	return &res, nil
}

// complete passes a completion request on to the server whose prompt or resource
// template it names, through its completion tool (offered under "completions": true).
// A template is the server's that lists it; with none or several listing it, each
// server is asked in the order of their names until one answers.
func (d *Door) complete(ctx context.Context, tenant string, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	p := req.Params
	if p == nil || p.Ref == nil {
		return nil, fmt.Errorf("completion/complete without a ref")
	}
	tools := d.promptTools(tenant, complete)
	args := map[string]any{"argument": p.Argument.Name, "value": p.Argument.Value}
	if p.Context != nil && len(p.Context.Arguments) > 0 {
		args["context"] = p.Context.Arguments
	}
	var servers []string
	switch p.Ref.Type {
	case "ref/prompt":
		server, name, err := d.promptOwner(ctx, tenant, req.Session, req.Extra, p.Ref.Name)
		if err != nil {
			return nil, err
		}
		servers, args["prompt"] = []string{server}, name
	case "ref/resource":
		args["uriTemplate"] = p.Ref.URI
		servers = d.templateOwners(ctx, tenant, req.Session, req.Extra, p.Ref.URI)
		if len(servers) != 1 {
			servers = slices.Sorted(maps.Keys(tools))
		}
	default:
		return nil, fmt.Errorf("completion/complete of a ref of type %q", p.Ref.Type)
	}
	var errs []error
	for _, server := range servers {
		tool, offered := tools[server]
		if !offered {
			errs = append(errs, fmt.Errorf("%s: its completions are not offered", server))
			continue
		}
		value, err := d.runFeature(ctx, tenant, req.Session, req.Extra, tool.Name, args)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var res mcp.CompleteResult
		if err := json.Unmarshal(value, &res.Completion); err != nil {
			return nil, fmt.Errorf("%s: %w", tool.Name, err)
		}
		if res.Completion.Values == nil {
			res.Completion.Values = []string{}
		}
		return &res, nil
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("no server offered completes %s %s%s", p.Ref.Type, p.Ref.Name, p.Ref.URI)
	}
	return nil, errors.Join(errs...)
}
