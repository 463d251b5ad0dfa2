package frontdoor

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nuid"

	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/messages"
)

// The remote names of the tools toolbus makes of a server's prompts (docs/mcp.md).
const (
	promptsList = "prompts:list"
	promptsGet  = "prompts:get"
)

// prompts answers prompts/list and prompts/get for tenant's clients with the backends'
// prompts, each named "<server>__<prompt>", through the pipeline: the servers'
// <server>__prompts_list and __prompts_get tools the tenant is offered run as any call
// does (policy, sessions of the conversation). resources/list and resources/read are
// answered the same way (resources.go). Every other method goes on to next.
func (d *Door) prompts(tenant string) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch r := req.(type) {
			case *mcp.ListPromptsRequest:
				return d.listPrompts(ctx, tenant, r)
			case *mcp.GetPromptRequest:
				return d.getPrompt(ctx, tenant, r)
			case *mcp.ListResourcesRequest:
				return d.listResources(ctx, tenant, r)
			case *mcp.ReadResourceRequest:
				return d.readResource(ctx, tenant, r)
			}
			return next(ctx, method, req)
		}
	}
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

func (d *Door) listPrompts(ctx context.Context, tenant string, req *mcp.ListPromptsRequest) (*mcp.ListPromptsResult, error) {
	tools := d.promptTools(tenant, promptsList)
	res := &mcp.ListPromptsResult{Prompts: []*mcp.Prompt{}}
	for _, server := range slices.Sorted(func(yield func(string) bool) {
		for s := range tools {
			if !yield(s) {
				return
			}
		}
	}) {
		value, err := d.runFeature(ctx, tenant, req.Session, req.Extra, tools[server].Name, map[string]any{})
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
				p.Name = server + "__" + p.Name
				res.Prompts = append(res.Prompts, p)
			}
		}
	}
	return res, nil
}

func (d *Door) getPrompt(ctx context.Context, tenant string, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	server, name, ok := strings.Cut(req.Params.Name, "__")
	tool, offered := d.promptTools(tenant, promptsGet)[server]
	if !ok || !offered {
		return nil, fmt.Errorf("no prompt %q: a prompt is named <server>__<prompt>, of a server whose prompts are offered", req.Params.Name)
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
