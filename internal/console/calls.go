package console

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/redact"
)

// ErrFilter: a filter names no conversation, tenant or outcome the console can read
// (errors.Is; the API answers 400).
var ErrFilter = errors.New("bad filter")

// Call is one answered call, as its response's output tells it.
type Call struct {
	Conversation string `json:"conversation"`
	ResponseID   string `json:"response_id"`
	Index        int    `json:"index"`
	Tool         string `json:"tool"`
	// Server is the server of the tool as the catalog resolves the name the model used
	// ("" when it does not know it).
	Server   string                `json:"server,omitempty"`
	Success  bool                  `json:"success"`
	Error    *messages.ResultError `json:"error,omitempty"`
	Attempts int                   `json:"attempts,omitempty"`
	// DurationMS is how long the call ran (its last attempt); 0 when it never ran.
	DurationMS float64 `json:"duration_ms,omitempty"`
	// ArgumentsBytes is the size of the call's arguments.
	ArgumentsBytes int `json:"arguments_bytes"`
	// Preview is the start of the result (at most 300 bytes), as the model sees it.
	Preview     string    `json:"preview,omitempty"`
	ResultBytes int       `json:"result_bytes"`
	At          time.Time `json:"at"`
	// Sequence is the output's sequence in its output stream.
	Sequence uint64 `json:"sequence"`
	TraceID  string `json:"trace_id,omitempty"`
	TraceURL string `json:"trace_url,omitempty"`
}

// CallFilter narrows the calls: by tenant ("" the default one; a conversation names its
// own), conversation, response, tool (any spelling of it the catalog resolves), server,
// outcome ("ok" or "failed") and the time their output was stored (Since, Until; zero:
// open), at most Limit calls (default 100) of the newest, below Cursor (a page's Next).
type CallFilter struct {
	Tenant, Conversation, Response, Tool, Server, Outcome string
	Since, Until                                          time.Time
	Cursor                                                uint64
	Limit                                                 int
}

// CallPage is one page of calls, newest first.
type CallPage struct {
	Calls []Call `json:"calls"`
	// Next continues with older calls (CallFilter.Cursor): the output stream's sequence
	// the page stopped at; 0 when no older output matches the filter's subject and time.
	Next uint64 `json:"next,omitempty"`
	// Scanned counts the outputs the page read (those on the filter's subject: a
	// conversation's, or a tenant's); Limit is the most one page reads
	// (Console.ScanLimit).
	Scanned int `json:"scanned"`
	Limit   int `json:"limit"`
	// Oldest is when the oldest output read was stored.
	Oldest time.Time `json:"oldest,omitzero"`
	// Notice says that the page stopped at Limit before it was full: older outputs
	// remain, from Next on.
	Notice string `json:"notice,omitempty"`
}

// Calls returns the newest calls the outputs kept tell of, newest first: the first
// page of FindCalls.
func (c *Console) Calls(ctx context.Context, f CallFilter) ([]Call, error) {
	page, err := c.FindCalls(ctx, f)
	return page.Calls, err
}

// FindCalls returns a page of the calls the filter selects, newest first, over
// everything the output streams keep. It reads only the outputs on the filter's subject
// (toolbus.output.<conversation>, or the tenant's), from the newest stored before Until
// and below Cursor back to Since, and at most Console.ScanLimit of them: a page cut by
// that bound says so (CallPage.Notice) and continues from CallPage.Next. Tool, server,
// outcome and response are read from each output.
func (c *Console) FindCalls(ctx context.Context, f CallFilter) (CallPage, error) {
	limit := cmp.Or(f.Limit, 100)
	page := CallPage{Calls: []Call{}, Limit: c.scanLimit()}
	if f.Outcome != "" && f.Outcome != "ok" && f.Outcome != "failed" {
		return page, fmt.Errorf("%w: outcome %q: ok or failed", ErrFilter, f.Outcome)
	}
	sp, err := c.outputs(ctx, f.Tenant, f.Conversation, f.Since, f.Until, f.Cursor)
	if err != nil {
		return page, err
	}
	names := c.names(ctx)
	b := sp.back(page.Limit)
	for len(page.Calls) < limit {
		var win []Call // this window's calls, oldest first
		ok, err := b.next(ctx, func(m jetstream.Msg) {
			md, _ := m.Metadata()
			if md != nil {
				page.Oldest = md.Timestamp.UTC()
			}
			win = append(win, c.calls(m, md, f, names)...)
		})
		if err != nil {
			return page, err
		}
		if !ok {
			break
		}
		for i := len(win) - 1; i >= 0; i-- {
			if n := len(page.Calls); n >= limit && win[i].Sequence != page.Calls[n-1].Sequence {
				// Full: the page ends with a whole output, and the next one starts below it.
				page.Scanned, page.Next = b.read, page.Calls[n-1].Sequence
				return page, nil
			}
			page.Calls = append(page.Calls, win[i])
		}
	}
	page.Scanned = b.read
	if !b.done() {
		page.Next = b.hi
		if len(page.Calls) < limit {
			page.Notice = fmt.Sprintf("this page read %d outputs, the most one page reads, back to %s, and found %d calls: older outputs remain (next page: cursor %d)",
				b.read, page.Oldest.Format(time.RFC3339), len(page.Calls), page.Next)
		}
	}
	return page, nil
}

// outputs is the span of the output stream that holds a tenant's or a conversation's
// outputs (the conversation names its tenant), in a time window and below a cursor.
func (c *Console) outputs(ctx context.Context, tenant, conversation string, since, until time.Time, cursor uint64) (span, error) {
	subject := messages.TenantSubjects(messages.OutputSubject, tenant)
	if conversation != "" {
		if err := messages.ValidateConversation(conversation); err != nil {
			return span{}, fmt.Errorf("%w: %w", ErrFilter, err)
		}
		subject, tenant = messages.OutputSubject(conversation), messages.Tenant(conversation)
	}
	if tenant != "" && !slices.Contains(c.Tenants, tenant) {
		return span{}, fmt.Errorf("%w: no tenant %q (the configuration's tenants: %v)", ErrFilter, tenant, c.Tenants)
	}
	s, err := c.JS.Stream(ctx, messages.OutputStream(tenant))
	if err != nil {
		return span{}, err
	}
	return window(ctx, s, subject, since, until, cursor)
}

// calls returns the calls of the output m that f selects, in the output's order.
func (c *Console) calls(m jetstream.Msg, md *jetstream.MsgMetadata, f CallFilter, names *names) []Call {
	var o messages.Output
	if messages.DecodeOutput(m.Data(), &o) != nil || o.FillResults() != nil {
		return nil
	}
	if f.Response != "" && o.ResponseID != f.Response {
		return nil
	}
	trace := traceID(m.Headers().Get(messages.HeaderTraceparent))
	var out []Call
	for k, r := range o.Results {
		tool, server := names.resolve(r.Tool)
		if f.Tool != "" && !names.same(r.Tool, f.Tool) || f.Server != "" && server != f.Server ||
			f.Outcome == "ok" && !r.Success || f.Outcome == "failed" && r.Success {
			continue
		}
		call := Call{Conversation: o.Conversation, ResponseID: o.ResponseID, Index: k, Tool: tool, Server: server, Success: r.Success,
			Error: r.Error, Attempts: r.Attempts, DurationMS: r.DurationMS, ArgumentsBytes: r.ArgumentsBytes, ResultBytes: len(r.Result), TraceID: trace}
		call.Preview = c.preview(r.Result)
		if call.Error != nil {
			e := *call.Error
			e.Message = c.Redact.String(e.Message)
			call.Error = &e
		}
		if md != nil {
			call.At, call.Sequence = md.Timestamp.UTC(), md.Sequence.Stream
		}
		if trace != "" && c.JaegerURL != "" {
			call.TraceURL = strings.TrimSuffix(c.JaegerURL, "/") + "/trace/" + trace
		}
		out = append(out, call)
	}
	return out
}

// traceID is the trace id of a W3C traceparent header ("" without one).
func traceID(traceparent string) string {
	parts := strings.Split(traceparent, "-")
	if len(parts) != 4 || len(parts[1]) != 32 {
		return ""
	}
	return parts[1]
}

func (c *Console) scanLimit() int { return cmp.Or(c.ScanLimit, DefaultScanLimit) }

// names resolves the names models called tools by to the catalog's tools, as the
// parser does (catalog.Resolve), once each: "spy__echo", "spy::echo" and
// "mcp__spy__echo" are one tool.
type names struct {
	cat  *catalog.Catalog
	seen map[string][2]string
	// mask hides secrets in a name the catalog does not know: a model wrote it, and
	// may have written a secret it read in a result.
	mask *redact.Redactor
}

// names reads the catalog bucket; without it, a tool is known by the name it was
// called by, and has no server.
func (c *Console) names(ctx context.Context) *names {
	n := &names{seen: map[string][2]string{}, mask: c.Redact}
	kv, err := c.JS.KeyValue(ctx, messages.BucketCatalog)
	if err != nil {
		return n
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return n
	}
	servers := map[string][]catalog.Tool{}
	for key := range keys.Keys() {
		if e, err := kv.Get(ctx, key); err == nil {
			var tools []catalog.Tool
			if json.Unmarshal(e.Value(), &tools) == nil {
				servers[key] = tools
			}
		}
	}
	n.cat = catalog.New(servers, nil)
	return n
}

// resolve returns the catalog's name of the tool a model called name, and its server;
// name (its secrets masked) and "" when the catalog does not know it.
func (n *names) resolve(name string) (tool, server string) {
	if r, ok := n.seen[name]; ok {
		return r[0], r[1]
	}
	tool = n.mask.String(name)
	if n.cat != nil {
		if t, err := n.cat.Resolve(name); err == nil {
			tool, server = t.Name, t.Server
		}
	}
	n.seen[name] = [2]string{tool, server}
	return tool, server
}

// same reports whether a and b name one tool.
func (n *names) same(a, b string) bool {
	if a == b {
		return true
	}
	ta, sa := n.resolve(a)
	tb, sb := n.resolve(b)
	return ta == tb && sa == sb
}

// StatsFilter chooses the outputs of ToolStats: a tenant's ("" the default one) or a
// conversation's, stored from Since (zero: an hour ago) until Until (zero: now).
type StatsFilter struct {
	Tenant, Conversation string
	Since, Until         time.Time
}

// ToolStats is what the outputs of a time window tell of one tool.
type ToolStats struct {
	Tool   string `json:"tool"`
	Server string `json:"server,omitempty"`
	Calls  int    `json:"calls"`
	Failed int    `json:"failed"`
	// ErrorRate is Failed / Calls.
	ErrorRate float64 `json:"error_rate"`
	// P50ms and P99ms are over the calls that ran (Ran: those with a duration; a call
	// refused before it ran, an unknown tool, has none).
	Ran   int     `json:"ran"`
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
}

// Stats summarises the calls of the outputs of a time window, by tool.
type Stats struct {
	Tools []ToolStats `json:"tools"`
	// Since and Until are the window.
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// Outputs counts the outputs read, Limit the most that are read (Console.ScanLimit):
	// the newest of the window.
	Outputs int `json:"outputs"`
	Limit   int `json:"limit"`
	// Oldest and Newest are when the oldest and newest output read were stored.
	Oldest time.Time `json:"oldest,omitzero"`
	Newest time.Time `json:"newest,omitzero"`
	// Notice says that the window holds more outputs than were read: the statistics are
	// of its newest Limit.
	Notice string `json:"notice,omitempty"`
}

// ToolStats counts the calls of each tool in the outputs of a time window, their error
// rate and their p50 and p99 durations, from the newest output of the window back, at
// most Console.ScanLimit outputs (Stats.Notice says when the window holds more).
func (c *Console) ToolStats(ctx context.Context, f StatsFilter) (Stats, error) {
	now := time.Now().UTC()
	st := Stats{Tools: []ToolStats{}, Since: f.Since, Until: f.Until, Limit: c.scanLimit()}
	if st.Until.IsZero() {
		st.Until = now
	}
	if st.Since.IsZero() {
		st.Since = st.Until.Add(-time.Hour)
	}
	sp, err := c.outputs(ctx, f.Tenant, f.Conversation, st.Since, st.Until, 0)
	if err != nil {
		return st, err
	}
	names := c.names(ctx)
	type acc struct {
		ToolStats
		ms []float64
	}
	byTool := map[[2]string]*acc{}
	b := sp.back(st.Limit)
	for {
		ok, err := b.next(ctx, func(m jetstream.Msg) {
			if md, err := m.Metadata(); err == nil {
				st.Oldest = md.Timestamp.UTC()
				if st.Newest.IsZero() || st.Oldest.After(st.Newest) {
					st.Newest = st.Oldest
				}
			}
			var o messages.Output
			if messages.DecodeOutput(m.Data(), &o) != nil {
				return
			}
			for _, r := range o.Results {
				tool, server := names.resolve(r.Tool)
				a := byTool[[2]string{tool, server}]
				if a == nil {
					a = &acc{ToolStats: ToolStats{Tool: tool, Server: server}}
					byTool[[2]string{tool, server}] = a
				}
				a.Calls++
				if !r.Success {
					a.Failed++
				}
				if r.DurationMS > 0 {
					a.ms = append(a.ms, r.DurationMS)
				}
			}
		})
		if err != nil {
			return st, err
		}
		if !ok {
			break
		}
	}
	st.Outputs = b.read
	if !b.done() {
		st.Notice = fmt.Sprintf("based on the newest %d outputs of the window, back to %s: the window holds older ones, not read (the most the console reads at once)",
			b.read, st.Oldest.Format(time.RFC3339))
	}
	for _, a := range byTool {
		t := a.ToolStats
		t.ErrorRate = float64(t.Failed) / float64(t.Calls)
		if t.Ran = len(a.ms); t.Ran > 0 {
			slices.Sort(a.ms)
			t.P50ms, t.P99ms = a.ms[(t.Ran-1)*50/100], a.ms[(t.Ran-1)*99/100]
		}
		st.Tools = append(st.Tools, t)
	}
	slices.SortFunc(st.Tools, func(a, b ToolStats) int {
		return cmp.Or(cmp.Compare(b.Calls, a.Calls), strings.Compare(a.Tool, b.Tool), strings.Compare(a.Server, b.Server))
	})
	return st, nil
}

// previewBytes is how much of a result the calls' page shows.
const previewBytes = 300

// secretSpan bounds the secrets the preview masks whole where it cuts the result: the
// result is masked past the cut by that much, then cut. (Cut first, a secret across the
// cut was left a prefix no secret matches, shown unmasked.)
const secretSpan = 4 << 10

// preview is the start of a result as the calls' page shows it, its secrets masked.
func (c *Console) preview(result []byte) string {
	if len(result) <= previewBytes {
		return c.Redact.String(string(result))
	}
	masked := c.Redact.String(string(result[:min(len(result), previewBytes+secretSpan)]))
	return masked[:min(len(masked), previewBytes)]
}
