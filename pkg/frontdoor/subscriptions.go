package frontdoor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/toolbus/toolbus/pkg/messages"
)

// The remote names of the tools toolbus makes of a server's resource subscriptions
// (docs/mcp.md), offered under its "subscriptions": true.
const (
	resourcesSubscribe   = "resources:subscribe"
	resourcesUnsubscribe = "resources:unsubscribe"
)

// watch relays the updates of the resources a conversation's sessions subscribed to:
// the executor whose backend session was subscribed publishes each on the
// conversation's progress subject, and the door tells the tenant's server, which
// notifies each session subscribed to the URI (notifications/resources/updated).
type watch struct {
	sub *nats.Subscription
	// sessions are the URIs each session subscribed to, and the servers subscribed
	// for it there.
	sessions map[*mcp.ServerSession]map[string][]string
}

// subscribe passes a client's resources/subscribe on to the servers that list the URI
// among their resources (every server offering subscriptions when none does: a
// resource of a template), through their subscribe tools in the pipeline, in the
// session's conversation, and relays the resource's updates to the session.
func (d *Door) subscribe(tenant string) func(context.Context, *mcp.SubscribeRequest) error {
	return func(ctx context.Context, req *mcp.SubscribeRequest) error {
		conv, _, err := d.conversation(tenant, req.Session, req.Extra)
		if err != nil {
			return err
		}
		uri := req.Params.URI
		tools := d.promptTools(tenant, resourcesSubscribe)
		if len(tools) == 0 {
			return fmt.Errorf("no server offered subscribes to resources (their \"subscriptions\" is not true)")
		}
		servers := d.resourceOwners(ctx, tenant, req.Session, req.Extra, uri)
		servers = slices.DeleteFunc(servers, func(s string) bool { _, ok := tools[s]; return !ok })
		if len(servers) == 0 {
			servers = slices.Sorted(maps.Keys(tools))
		}
		var subscribed []string
		var errs []error
		for _, server := range servers {
			if _, err := d.runFeatureIn(ctx, conv, tools[server].Name, map[string]any{"uri": uri}); err != nil {
				errs = append(errs, err)
				continue
			}
			subscribed = append(subscribed, server)
		}
		if len(subscribed) == 0 {
			return errors.Join(errs...)
		}
		return d.watchFor(tenant, conv, req.Session, uri, subscribed)
	}
}

// unsubscribe ends a session's subscription at the servers subscribed for it.
func (d *Door) unsubscribe(tenant string) func(context.Context, *mcp.UnsubscribeRequest) error {
	return func(ctx context.Context, req *mcp.UnsubscribeRequest) error {
		conv, _, err := d.conversation(tenant, req.Session, req.Extra)
		if err != nil {
			return err
		}
		servers := d.unwatch(conv, req.Session, req.Params.URI)
		return d.unsubscribeAt(ctx, tenant, conv, req.Params.URI, servers)
	}
}

// unsubscribeAt runs the unsubscribe tools of servers for uri in conv.
func (d *Door) unsubscribeAt(ctx context.Context, tenant, conv, uri string, servers []string) error {
	tools := d.promptTools(tenant, resourcesUnsubscribe)
	var errs []error
	for _, server := range servers {
		tool, ok := tools[server]
		if !ok {
			continue
		}
		if _, err := d.runFeatureIn(ctx, conv, tool.Name, map[string]any{"uri": uri}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// resourceOwners are the servers that list uri among their resources.
func (d *Door) resourceOwners(ctx context.Context, tenant string, ss *mcp.ServerSession, extra *mcp.RequestExtra, uri string) []string {
	resources, _, servers, _ := d.serverResourcesOwned(ctx, tenant, ss, extra)
	return ownersOf(resources, servers, func(r *mcp.Resource) bool { return r.URI == uri })
}

// watchFor notes that session subscribed to uri at servers, and relays conv's updates
// to tenant's server while any session of conv is subscribed to anything. A session
// that ends is unsubscribed at the servers.
func (d *Door) watchFor(tenant, conv string, session *mcp.ServerSession, uri string, servers []string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	w := d.watches[conv]
	if w == nil {
		srv := d.servers[tenant].srv
		sub, err := d.client.OnResourceUpdated(conv, func(u messages.ResourceUpdated) {
			_ = srv.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: u.URI})
		})
		if err != nil {
			return fmt.Errorf("frontdoor: relaying the updates of %s: %w", uri, err)
		}
		w = &watch{sub: sub, sessions: map[*mcp.ServerSession]map[string][]string{}}
		d.watches[conv] = w
	}
	uris := w.sessions[session]
	if uris == nil {
		uris = map[string][]string{}
		w.sessions[session] = uris
		go func() {
			_ = session.Wait()
			d.sessionEnded(tenant, conv, session)
		}()
	}
	for _, s := range servers {
		if !slices.Contains(uris[uri], s) {
			uris[uri] = append(uris[uri], s)
		}
	}
	return nil
}

// unwatch forgets session's subscription to uri and returns the servers subscribed for
// it; the relay of conv's updates ends with its last subscription.
func (d *Door) unwatch(conv string, session *mcp.ServerSession, uri string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	w := d.watches[conv]
	if w == nil {
		return nil
	}
	servers := w.sessions[session][uri]
	delete(w.sessions[session], uri)
	if len(w.sessions[session]) == 0 {
		delete(w.sessions, session)
	}
	if len(w.sessions) == 0 {
		_ = w.sub.Unsubscribe()
		delete(d.watches, conv)
	}
	return servers
}

// sessionEnded unsubscribes an ended session's resources at their servers.
func (d *Door) sessionEnded(tenant, conv string, session *mcp.ServerSession) {
	d.mu.Lock()
	var uris map[string][]string
	if w := d.watches[conv]; w != nil {
		uris = maps.Clone(w.sessions[session])
	}
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for uri := range uris {
		if err := d.unsubscribeAt(ctx, tenant, conv, uri, d.unwatch(conv, session, uri)); err != nil {
			d.o.Logger.Warn("mcp: an ended session's subscription not ended", "conversation", conv, "uri", uri, "err", err)
		}
	}
}
