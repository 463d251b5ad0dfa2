package frontdoor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolbus/toolbus/pkg/messages"
)

// The remote names of the tools toolbus makes of a server's resources (docs/mcp.md).
const (
	resourcesList = "resources:list"
	resourcesRead = "resources:read"
)

// listResources lists the backends' resources (each server's first page), their names
// "<server>__<name>", their URIs as the servers gave them.
func (d *Door) listResources(ctx context.Context, tenant string, req *mcp.ListResourcesRequest) (*mcp.ListResourcesResult, error) {
	tools := d.promptTools(tenant, resourcesList)
	res := &mcp.ListResourcesResult{Resources: []*mcp.Resource{}}
	for _, server := range slices.Sorted(maps.Keys(tools)) {
		value, err := d.runFeature(ctx, tenant, req.Session, req.Extra, tools[server].Name, map[string]any{})
		if err != nil {
			d.o.Logger.Warn("mcp: a server's resources are not listed", "server", server, "err", err)
			continue
		}
		var listed struct {
			Resources []*mcp.Resource `json:"resources"`
		}
		if err := json.Unmarshal(value, &listed); err != nil {
			d.o.Logger.Warn("mcp: a server's resources are not listed", "server", server, "err", err)
			continue
		}
		for _, r := range listed.Resources {
			if r != nil {
				r.Name = server + "__" + r.Name
				res.Resources = append(res.Resources, r)
			}
		}
	}
	return res, nil
}

// readResource reads uri from the servers whose resources the tenant is offered, in
// the order of their names, until one has it: a URI names no server, and the door keeps
// no list of who has what. A text resource comes back as its text (toolbus's read tool
// gives the text, not its media type); a blob as the resource block the tool kept.
func (d *Door) readResource(ctx context.Context, tenant string, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	tools := d.promptTools(tenant, resourcesRead)
	var errs []error
	for _, server := range slices.Sorted(maps.Keys(tools)) {
		r, err := d.runFeatureResult(ctx, tenant, req.Session, req.Extra, tools[server].Name, map[string]any{"uri": req.Params.URI})
		var failed *featureError
		if errors.As(err, &failed) && (failed.code == messages.CodeToolError || failed.code == messages.CodeInvalidArguments) {
			errs = append(errs, err) // not this server's resource (its "not found")
			continue
		}
		if err != nil {
			return nil, err
		}
		return d.resourceContents(ctx, req.Params.URI, r)
	}
	if len(errs) == 0 {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	return nil, fmt.Errorf("%w: %w", mcp.ResourceNotFoundError(req.Params.URI), errors.Join(errs...))
}

// resourceContents is a read tool's result as resources/read gives it.
func (d *Door) resourceContents(ctx context.Context, uri string, r *messages.OutputResult) (*mcp.ReadResourceResult, error) {
	res := &mcp.ReadResourceResult{}
	for _, block := range r.Content {
		if block.Type != messages.ContentResource || block.Resource == nil {
			continue
		}
		data, err := d.client.FetchContent(ctx, block)
		if err != nil {
			return nil, err
		}
		res.Contents = append(res.Contents, &mcp.ResourceContents{URI: block.Resource.URI, MIMEType: block.MimeOf(), Blob: data})
	}
	if len(res.Contents) > 0 {
		return res, nil
	}
	text := string(r.Result)
	var s string
	if json.Unmarshal(r.Result, &s) == nil {
		text = s
	}
	res.Contents = []*mcp.ResourceContents{{URI: uri, Text: text}}
	return res, nil
}
