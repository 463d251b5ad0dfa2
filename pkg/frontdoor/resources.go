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

// serverResources are the resources and resource templates of the servers whose
// resources tenant is offered (each server's first page), in the order of the servers'
// names, with the names the door gives them (doorNames: a resource's or a template's own
// where no other server has one so named).
func (d *Door) serverResources(ctx context.Context, tenant string, ss *mcp.ServerSession, extra *mcp.RequestExtra) ([]*mcp.Resource, []*mcp.ResourceTemplate) {
	resources, templates, _, _ := d.serverResourcesOwned(ctx, tenant, ss, extra)
	return resources, templates
}

// serverResourcesOwned is serverResources with the server of each resource and
// template.
func (d *Door) serverResourcesOwned(ctx context.Context, tenant string, ss *mcp.ServerSession, extra *mcp.RequestExtra) (resources []*mcp.Resource, templates []*mcp.ResourceTemplate, rServers, tServers []string) {
	tools := d.promptTools(tenant, resourcesList)
	var rOwners, tOwners []owned
	for _, server := range slices.Sorted(maps.Keys(tools)) {
		value, err := d.runFeature(ctx, tenant, ss, extra, tools[server].Name, map[string]any{})
		if err != nil {
			d.o.Logger.Warn("mcp: a server's resources are not listed", "server", server, "err", err)
			continue
		}
		var listed struct {
			Resources []*mcp.Resource         `json:"resources"`
			Templates []*mcp.ResourceTemplate `json:"resourceTemplates"`
		}
		if err := json.Unmarshal(value, &listed); err != nil {
			d.o.Logger.Warn("mcp: a server's resources are not listed", "server", server, "err", err)
			continue
		}
		for _, r := range listed.Resources {
			if r != nil {
				resources, rOwners = append(resources, r), append(rOwners, owned{server, r.Name})
			}
		}
		for _, t := range listed.Templates {
			if t != nil {
				templates, tOwners = append(templates, t), append(tOwners, owned{server, t.Name})
			}
		}
	}
	for i, name := range doorNames(rOwners) {
		resources[i].Name = name
		rServers = append(rServers, rOwners[i].server)
	}
	for i, name := range doorNames(tOwners) {
		templates[i].Name = name
		tServers = append(tServers, tOwners[i].server)
	}
	return resources, templates, rServers, tServers
}

// templateOwners are the servers that list uriTemplate among their resource templates.
func (d *Door) templateOwners(ctx context.Context, tenant string, ss *mcp.ServerSession, extra *mcp.RequestExtra, uriTemplate string) []string {
	_, templates, _, servers := d.serverResourcesOwned(ctx, tenant, ss, extra)
	return ownersOf(templates, servers, func(t *mcp.ResourceTemplate) bool { return t.URITemplate == uriTemplate })
}

// ownersOf are the servers (servers[i] lists items[i]) that list an item that matches,
// each once.
func ownersOf[T any](items []T, servers []string, match func(T) bool) []string {
	var out []string
	for i, item := range items {
		if match(item) && !slices.Contains(out, servers[i]) {
			out = append(out, servers[i])
		}
	}
	return out
}

// listResources lists the backends' resources, their URIs as the servers gave them.
func (d *Door) listResources(ctx context.Context, tenant string, req *mcp.ListResourcesRequest) (*mcp.ListResourcesResult, error) {
	resources, _ := d.serverResources(ctx, tenant, req.Session, req.Extra)
	return &mcp.ListResourcesResult{Resources: append([]*mcp.Resource{}, resources...)}, nil
}

// listResourceTemplates lists the backends' resource templates, as the servers gave them.
func (d *Door) listResourceTemplates(ctx context.Context, tenant string, req *mcp.ListResourceTemplatesRequest) (*mcp.ListResourceTemplatesResult, error) {
	_, templates := d.serverResources(ctx, tenant, req.Session, req.Extra)
	return &mcp.ListResourceTemplatesResult{ResourceTemplates: append([]*mcp.ResourceTemplate{}, templates...)}, nil
}

// readResource reads uri from the servers whose resources the tenant is offered, in
// the order of their names, until one has it: a URI names no server, and the door keeps
// no list of who has what. The contents come back as the server gave them: the read
// tool keeps each resource as a block (a text resource's IsText), beside the text the
// model would read.
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

// resourceContents is a read tool's result as resources/read gives it: its resource
// blocks, a text resource's as text; a result without any (an executor before they were
// kept) as its text.
func (d *Door) resourceContents(ctx context.Context, uri string, r *messages.OutputResult) (*mcp.ReadResourceResult, error) {
	res := &mcp.ReadResourceResult{}
	for _, block := range r.Content {
		if block.Type != messages.ContentResource || block.Resource == nil {
			continue
		}
		c, err := contentBlock(ctx, d.client, block)
		if err != nil {
			return nil, err
		}
		res.Contents = append(res.Contents, c.(*mcp.EmbeddedResource).Resource)
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
