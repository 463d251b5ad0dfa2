// Package console serves toolbus's web console: the flow of the pipeline, its servers
// and tools, the calls and dead letters the streams keep (by conversation, tool,
// server, outcome and time, page by page, over the whole retention) with each tool's
// statistics, and a box to try a response, on one page, with the same data as JSON
// under /api/. Everything is read from NATS — streams, consumers, key-value buckets —
// when asked: the console keeps no store and costs the pipeline nothing while nobody
// looks.
package console

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/toolbus/toolbus/pkg/dialect"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/ops"
	"github.com/toolbus/toolbus/pkg/redact"
)

// Console reads the state of one toolbus deployment.
type Console struct {
	// NC answers the replicas' status requests and carries the results the console
	// watches while someone looks (see Flow).
	NC     *nats.Conn
	JS     jetstream.JetStream
	Client *client.Client
	// JaegerURL, when set, is where trace links point (JAEGER_URL/trace/<trace id>).
	JaegerURL string
	// Redact hides secrets in what the console shows of results, errors and dead
	// letters: the configuration's (config.Config.Redactor), and any URL's. nil hides
	// the latter.
	Redact *redact.Redactor
	// Tenants are the deployment's tenants besides the default one (the configuration's
	// tenants): the console reads each one's output stream, and filters calls by tenant.
	Tenants []string
	// ScanLimit bounds the messages one page of calls or dead letters, or one set of
	// tool statistics, reads (0: DefaultScanLimit): a page cut by it says so.
	ScanLimit int

	watch watcher
}

// Queue is one stage's queue: its consumer's counts.
type Queue struct {
	Stage    string `json:"stage"`
	Stream   string `json:"stream"`
	Consumer string `json:"consumer"`
	// Pending: stored, not yet delivered; AckPending: delivered, not yet acknowledged.
	Pending    uint64 `json:"pending"`
	AckPending int    `json:"ack_pending"`
	// Delivered counts the messages the stage took since the consumer was made.
	Delivered uint64 `json:"delivered"`
	// Waiting counts the pull requests of its replicas waiting for messages.
	Waiting int `json:"waiting"`
	// Replicas and Ready count the replicas of the stage that answered a status
	// request, and those of them ready (services run with an ops server: serve and the
	// service binaries); -1 when none answered.
	Replicas int `json:"replicas"`
	Ready    int `json:"ready"`
}

// Flow is the pipeline at one moment.
type Flow struct {
	At     time.Time `json:"at"`
	Queues []Queue   `json:"queues"`
	// Outputs counts the outputs kept in the output streams (every tenant's), Dead the
	// dead letters (the dead-letter stream's messages but the records of redrives).
	Outputs uint64 `json:"outputs"`
	Dead    uint64 `json:"dead"`
	// Tenants are the deployment's tenants besides the default one, for the calls'
	// filter.
	Tenants []string `json:"tenants"`
	// Latency is the calls' duration (as the executor measured each) over the last
	// five minutes the console was watched: it follows the results only while a page
	// is open (Watch), so that nobody watching costs the pipeline nothing.
	Latency Latency `json:"latency"`
}

// Latency summarises call durations.
type Latency struct {
	Calls int     `json:"calls"`
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
}

var queues = []struct{ stage, service, stream, consumer string }{
	{"responses", "parser", messages.StreamResponses, messages.ConsumerParser},
	{"chunks", "parser", messages.StreamChunks, messages.ConsumerParser},
	{"calls", "executor", messages.StreamCalls, messages.ConsumerExecutor},
	{"results", "formatter", messages.StreamResults, messages.ConsumerFormatter},
}

// Flow reads the queues of the stages.
func (c *Console) Flow(ctx context.Context) (Flow, error) {
	f := Flow{At: time.Now().UTC()}
	for _, q := range queues {
		cons, err := c.JS.Consumer(ctx, q.stream, q.consumer)
		if err != nil {
			return f, fmt.Errorf("%s: %w", q.stream, err)
		}
		info, err := cons.Info(ctx)
		if err != nil {
			return f, fmt.Errorf("%s: %w", q.stream, err)
		}
		f.Queues = append(f.Queues, Queue{Stage: q.stage, Stream: q.stream, Consumer: q.consumer, Pending: info.NumPending,
			AckPending: info.NumAckPending, Delivered: info.Delivered.Consumer, Waiting: info.NumWaiting, Replicas: -1})
	}
	replicas := map[string][2]int{}
	for _, st := range c.statuses(ctx) {
		n := replicas[st.Stage]
		n[0]++
		if st.Ready.Ready {
			n[1]++
		}
		replicas[st.Stage] = n
	}
	for i, q := range queues {
		if r, ok := replicas[q.service]; ok {
			f.Queues[i].Replicas, f.Queues[i].Ready = r[0], r[1]
		}
	}
	f.Latency = c.watch.latency(time.Now().Add(-5 * time.Minute))
	counts := map[string]*uint64{}
	outputs := make([]uint64, 1+len(c.Tenants))
	for i, tenant := range append([]string{""}, c.Tenants...) {
		counts[messages.OutputStream(tenant)] = &outputs[i]
	}
	for name, n := range counts {
		s, err := c.JS.Stream(ctx, name)
		if err != nil {
			return f, fmt.Errorf("%s: %w", name, err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			return f, fmt.Errorf("%s: %w", name, err)
		}
		*n = info.State.Msgs
	}
	for _, n := range outputs {
		f.Outputs += n
	}
	dead, err := c.JS.Stream(ctx, messages.StreamDead)
	if err != nil {
		return f, fmt.Errorf("%s: %w", messages.StreamDead, err)
	}
	if f.Dead, err = deadCount(ctx, dead); err != nil {
		return f, fmt.Errorf("%s: %w", messages.StreamDead, err)
	}
	f.Tenants = append([]string{}, c.Tenants...)
	return f, nil
}

// statuses asks every replica of the stages for its status (toolbus.status.<service>,
// answered by each replica of a service run with an ops server) and returns the answers
// that came: the first within a second, each next within a quarter second of the one
// before, two seconds at most.
func (c *Console) statuses(ctx context.Context) []ops.StatusReply {
	var out []ops.StatusReply
	if c.NC == nil {
		return nil
	}
	inbox := c.NC.NewRespInbox()
	replies := make(chan *nats.Msg, 256)
	sub, err := c.NC.ChanSubscribe(inbox, replies)
	if err != nil {
		return out
	}
	defer sub.Unsubscribe()
	for _, s := range []string{"parser", "executor", "formatter"} {
		_ = c.NC.PublishRequest(messages.StatusSubject(s), inbox, nil)
	}
	// Replicas answer within milliseconds, but a busy one late: the first reply is
	// awaited up to a second, then each next one up to a quarter second after the one
	// before, two seconds in all.
	end := time.Now().Add(2 * time.Second)
	wait := time.NewTimer(time.Second)
	defer wait.Stop()
	for {
		select {
		case m := <-replies:
			var st ops.StatusReply
			if json.Unmarshal(m.Data, &st) == nil && st.Stage != "" {
				out = append(out, st)
			}
			wait.Reset(min(250*time.Millisecond, max(time.Until(end), 0)))
		case <-wait.C:
			return out
		case <-ctx.Done():
			return out
		}
	}
}

// Server is a server's last status, and what the executors' circuit breakers say of it.
type Server struct {
	messages.HealthStatus
	// Breaker is "closed", "open" (every executor refuses its calls at once) or "open in
	// k of n executors"; "" when no executor answered a status request.
	Breaker string `json:"breaker,omitempty"`
	// Sessions counts the conversations' sessions open with a conversation-scoped
	// server, over every executor that answered; nil for other servers.
	Sessions *int `json:"sessions,omitempty"`
}

// Servers returns every server's last status, by name.
func (c *Console) Servers(ctx context.Context) ([]Server, error) {
	kv, err := c.JS.KeyValue(ctx, messages.BucketHealth)
	if err != nil {
		return nil, err
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	executors, open, sessions := 0, map[string]int{}, map[string]int{}
	for _, st := range c.statuses(ctx) {
		if st.Stage == "executor" {
			executors++
			for server, n := range st.Sessions {
				sessions[server] += n
			}
			for server, o := range st.Breakers {
				if o {
					open[server]++
				}
			}
		}
	}
	out := []Server{}
	for key := range keys.Keys() {
		if key == messages.HealthLeaderKey {
			continue
		}
		e, err := kv.Get(ctx, key)
		if err != nil {
			continue // deleted meanwhile
		}
		var st messages.HealthStatus
		if json.Unmarshal(e.Value(), &st) == nil {
			st.Error = c.Redact.String(st.Error)
			s := Server{HealthStatus: st}
			if n, ok := sessions[st.Server]; ok {
				s.Sessions = &n
			}
			switch n := open[st.Server]; {
			case executors == 0 || st.Transport == "in-process": // breakers guard MCP servers
			case n == 0:
				s.Breaker = "closed"
			case n == executors:
				s.Breaker = "open"
			default:
				s.Breaker = fmt.Sprintf("open in %d of %d executors", n, executors)
			}
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b Server) int { return strings.Compare(a.Server, b.Server) })
	return out, nil
}

// Tool is one tool of the catalog, with its declaration in each vendor's API.
type Tool struct {
	catalog.Tool
	Backend      string                     `json:"backend"`
	Declarations map[string]json.RawMessage `json:"declarations"`
}

// Tools returns the catalog the parser reads, each tool with its declarations.
func (c *Console) Tools(ctx context.Context) ([]Tool, error) {
	kv, err := c.JS.KeyValue(ctx, messages.BucketCatalog)
	if err != nil {
		return nil, err
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	out := []Tool{}
	for key := range keys.Keys() {
		e, err := kv.Get(ctx, key)
		if err != nil {
			continue
		}
		var tools []catalog.Tool
		if json.Unmarshal(e.Value(), &tools) != nil {
			continue
		}
		for _, t := range tools {
			tool := Tool{Tool: t, Backend: key, Declarations: map[string]json.RawMessage{}}
			for _, d := range []dialect.Dialect{dialect.OpenAI, dialect.Anthropic, dialect.Gemini} {
				if decl, err := dialect.Declarations(d, []catalog.Tool{t}); err == nil {
					tool.Declarations[string(d)] = decl
				}
			}
			out = append(out, tool)
		}
	}
	slices.SortFunc(out, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
