// Package console serves toolbus's web console: the flow of the pipeline, its servers,
// tools, recent calls and dead letters, and a box to try a response, on one page, with
// the same data as JSON under /api/. Everything is read from NATS — streams, consumers,
// key-value buckets — when asked: the console keeps no store and costs the pipeline
// nothing while nobody looks.
package console

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/toolbus/toolbus/pkg/dialect"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
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
	// Outputs and Dead count the messages kept in the output streams (every tenant's)
	// and the dead-letter stream.
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
	counts := map[string]*uint64{messages.StreamDead: &f.Dead}
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
	f.Tenants = append([]string{}, c.Tenants...)
	return f, nil
}

// statuses asks every replica of the stages for its status (toolbus.status.<service>,
// answered by each replica of a service run with an ops server) and returns the answers
// that came within a quarter second.
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
	wait := time.NewTimer(250 * time.Millisecond)
	defer wait.Stop()
	for {
		select {
		case m := <-replies:
			var st ops.StatusReply
			if json.Unmarshal(m.Data, &st) == nil && st.Stage != "" {
				out = append(out, st)
			}
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

// Call is one answered call, as its response's output tells it.
type Call struct {
	Conversation string                `json:"conversation"`
	ResponseID   string                `json:"response_id"`
	Index        int                   `json:"index"`
	Tool         string                `json:"tool"`
	Success      bool                  `json:"success"`
	Error        *messages.ResultError `json:"error,omitempty"`
	Attempts     int                   `json:"attempts,omitempty"`
	DurationMS   float64               `json:"duration_ms,omitempty"`
	// ArgumentsBytes is the size of the call's arguments.
	ArgumentsBytes int `json:"arguments_bytes"`
	// Preview is the start of the result (at most 300 bytes), as the model sees it.
	Preview     string    `json:"preview,omitempty"`
	ResultBytes int       `json:"result_bytes"`
	At          time.Time `json:"at"`
	TraceID     string    `json:"trace_id,omitempty"`
	TraceURL    string    `json:"trace_url,omitempty"`
}

// CallFilter narrows Calls: by tenant ("" the default one; a conversation names its
// own), conversation, tool, outcome ("ok" or "failed"), at most Limit (default 100) of
// the newest.
type CallFilter struct {
	Tenant, Conversation, Tool, Outcome string
	Limit                               int
}

// Calls returns the newest calls the outputs kept tell of, newest first.
func (c *Console) Calls(ctx context.Context, f CallFilter) ([]Call, error) {
	limit := cmp.Or(f.Limit, 100)
	subject := messages.TenantSubjects(messages.OutputSubject, f.Tenant)
	if f.Conversation != "" {
		if err := messages.ValidateConversation(f.Conversation); err != nil {
			return nil, err
		}
		subject, f.Tenant = messages.OutputSubject(f.Conversation), messages.Tenant(f.Conversation)
	}
	if f.Tenant != "" && !slices.Contains(c.Tenants, f.Tenant) {
		return nil, fmt.Errorf("no tenant %q (the configuration's tenants: %v)", f.Tenant, c.Tenants)
	}
	msgs, err := c.last(ctx, messages.OutputStream(f.Tenant), subject, 1000)
	if err != nil {
		return nil, err
	}
	out := []Call{}
	for i := len(msgs) - 1; i >= 0 && len(out) < limit; i-- {
		m := msgs[i]
		var o messages.Output
		if messages.DecodeOutput(m.Data(), &o) != nil || o.FillResults() != nil {
			continue
		}
		md, _ := m.Metadata()
		trace := traceID(m.Headers().Get(messages.HeaderTraceparent))
		for k := len(o.Results) - 1; k >= 0 && len(out) < limit; k-- {
			r := o.Results[k]
			if f.Tool != "" && r.Tool != f.Tool || f.Outcome == "ok" && !r.Success || f.Outcome == "failed" && r.Success {
				continue
			}
			call := Call{Conversation: o.Conversation, ResponseID: o.ResponseID, Index: k, Tool: r.Tool, Success: r.Success,
				Error: r.Error, Attempts: r.Attempts, DurationMS: r.DurationMS, ArgumentsBytes: r.ArgumentsBytes, ResultBytes: len(r.Result), TraceID: trace}
			call.Preview = c.Redact.String(string(r.Result[:min(len(r.Result), 300)]))
			if call.Error != nil {
				e := *call.Error
				e.Message = c.Redact.String(e.Message)
				call.Error = &e
			}
			if md != nil {
				call.At = md.Timestamp.UTC()
			}
			if trace != "" && c.JaegerURL != "" {
				call.TraceURL = strings.TrimSuffix(c.JaegerURL, "/") + "/trace/" + trace
			}
			out = append(out, call)
		}
	}
	return out, nil
}

// traceID is the trace id of a W3C traceparent header ("" without one).
func traceID(traceparent string) string {
	parts := strings.Split(traceparent, "-")
	if len(parts) != 4 || len(parts[1]) != 32 {
		return ""
	}
	return parts[1]
}

// last returns up to n of the newest messages of stream on subject, oldest first.
func (c *Console) last(ctx context.Context, stream, subject string, n int) ([]jetstream.Msg, error) {
	s, err := c.JS.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, err
	}
	if info.State.Msgs == 0 {
		return nil, nil
	}
	start := uint64(1)
	if info.State.LastSeq > uint64(n) {
		start = info.State.LastSeq - uint64(n) + 1
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject},
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start})
	if err != nil {
		return nil, err
	}
	var msgs []jetstream.Msg
	for {
		batch, err := cons.FetchNoWait(256)
		if err != nil {
			return nil, err
		}
		got := 0
		for m := range batch.Messages() {
			got++
			msgs = append(msgs, m)
		}
		if got == 0 || batch.Error() != nil {
			return msgs, batch.Error()
		}
	}
}

// DeadLetter is one message of the dead-letter stream.
type DeadLetter struct {
	Sequence     uint64    `json:"sequence"`
	Conversation string    `json:"conversation"`
	At           time.Time `json:"at"`
	// Kind is "call" (a call that ran out of deliveries), "message" (a message no stage
	// finished) or "redrive" (the record of a redrive).
	Kind   string `json:"kind"`
	Tool   string `json:"tool,omitempty"`
	Reason string `json:"reason"`
	// Redrivable: a call or a response that can be sent again.
	Redrivable bool `json:"redrivable"`
	// Redriven is the response id of the newest redrive of this dead letter among the
	// letters read ("" when none): a second redrive must be forced (ForceRedrive).
	Redriven string          `json:"redriven,omitempty"`
	Body     json.RawMessage `json:"body"`
}

// Dead returns the newest dead letters (at most 200), newest first.
func (c *Console) Dead(ctx context.Context) ([]DeadLetter, error) {
	msgs, err := c.last(ctx, messages.StreamDead, messages.AllDead, 200)
	if err != nil {
		return nil, err
	}
	redriven := map[uint64]string{} // a dead letter's sequence: its newest redrive
	for _, m := range msgs {
		if r, ok := redriveOf(m.Data()); ok {
			redriven[r.Redrive] = r.ResponseID
		}
	}
	out := []DeadLetter{}
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		md, err := m.Metadata()
		if err != nil {
			continue
		}
		dl := DeadLetter{Sequence: md.Sequence.Stream, Conversation: messages.ConversationFromSubject(m.Subject()), At: md.Timestamp.UTC()}
		if body, err := json.Marshal(c.Redact.String(string(m.Data()))); err == nil {
			dl.Body = body // as text, its secrets hidden
		}
		if r, ok := redriveOf(m.Data()); ok {
			dl.Kind, dl.Reason = "redrive", fmt.Sprintf("dead letter %d sent again as %s", r.Redrive, r.ResponseID)
			if r.Forced {
				dl.Reason += " (forced)"
			}
		} else if text, tool, reason, ok := deadText(m.Data()); ok {
			dl.Kind, dl.Tool, dl.Reason, dl.Redrivable = "call", tool, reason, text != ""
			dl.Redriven = redriven[dl.Sequence]
			if tool == "" {
				dl.Kind = "message"
			}
		} else {
			dl.Kind, dl.Reason = "message", "unreadable"
		}
		dl.Reason = c.Redact.String(dl.Reason)
		out = append(out, dl)
	}
	return out, nil
}

// Redrive is what the dead-letter stream records of a message sent again, on the
// subject of the dead letter's conversation, before it is sent.
type Redrive struct {
	Redrive    uint64 `json:"redrive"` // the dead letter's sequence
	ResponseID string `json:"response_id"`
	// Forced: sent again although it had been redriven before (ForceRedrive).
	Forced bool `json:"forced,omitempty"`
}

func redriveOf(data []byte) (Redrive, bool) {
	var r Redrive
	return r, json.Unmarshal(data, &r) == nil && r.Redrive != 0
}

// deadText returns the response text that runs a dead letter again: the call of a dead
// call written as a <tool_call>, or the text of a lost response; its tool and reason.
func deadText(data []byte) (text, tool, reason string, ok bool) {
	var call messages.DeadCall
	if json.Unmarshal(data, &call) == nil && call.Call.ID != "" {
		reason = "no reason"
		if call.Result.Error != nil {
			reason = string(call.Result.Error.Code) + ": " + call.Result.Error.Message
		}
		b, err := json.Marshal(map[string]any{"name": call.Call.Tool, "arguments": call.Call.Arguments})
		if err != nil {
			return "", call.Call.Tool, reason, true
		}
		return "<tool_call>" + string(b) + "</tool_call>", call.Call.Tool, reason, true
	}
	var dl messages.DeadLetter
	if json.Unmarshal(data, &dl) == nil && dl.Stream != "" {
		switch dl.Stream {
		case messages.StreamResponses:
			return dl.Text, "", dl.Reason, true
		case messages.StreamCalls:
			var c messages.ToolCall
			if json.Unmarshal(dl.Data, &c) == nil && c.Tool != "" {
				b, err := json.Marshal(map[string]any{"name": c.Tool, "arguments": c.Arguments})
				if err == nil {
					return "<tool_call>" + string(b) + "</tool_call>", c.Tool, dl.Reason, true
				}
			}
		}
		return "", "", dl.Reason, true
	}
	return "", "", "", false
}

// ErrNotRedrivable: the dead letter holds nothing to send again.
var ErrNotRedrivable = errors.New("this dead letter holds no call or response to send again")

// ErrRedriven: the dead letter was redriven before (errors.Is; the error is a
// *RedrivenError).
var ErrRedriven = errors.New("this dead letter was redriven before")

// RedrivenError refuses a second redrive of a dead letter: its call may have run
// already, and running it again may repeat its side effect. ForceRedrive sends it anyway.
type RedrivenError struct {
	Seq uint64 `json:"seq"`
	// ResponseID is the newest redrive's response id; Record and At its record's sequence
	// and time in the dead-letter stream.
	ResponseID string    `json:"response_id"`
	Record     uint64    `json:"record"`
	At         time.Time `json:"at"`
}

func (e *RedrivenError) Error() string {
	return fmt.Sprintf("dead letter %d was redriven already, as %s at %s (record %d): a forced redrive runs its call again, which repeats its side effect if the first one ran",
		e.Seq, e.ResponseID, e.At.UTC().Format(time.RFC3339), e.Record)
}

func (e *RedrivenError) Is(target error) bool { return target == ErrRedriven }

// Redrive sends the call (or response) of the dead letter at seq again, as a new
// response of its conversation with a new id, records that in the dead-letter stream,
// and returns the new response's output. A dead letter is redriven once: when the
// stream records a redrive of seq already, Redrive sends nothing and returns a
// *RedrivenError (ErrRedriven). The record and the check are one step: the record is
// published only if nothing was filed on the conversation's dead-letter subject since
// the check (JetStream's expected last sequence per subject), so two redrives at once
// send the call once.
func (c *Console) Redrive(ctx context.Context, seq uint64) (*messages.Output, error) {
	return c.redrive(ctx, seq, false)
}

// ForceRedrive is Redrive, also of a dead letter redriven before: its call runs again.
func (c *Console) ForceRedrive(ctx context.Context, seq uint64) (*messages.Output, error) {
	return c.redrive(ctx, seq, true)
}

func (c *Console) redrive(ctx context.Context, seq uint64, force bool) (*messages.Output, error) {
	s, err := c.JS.Stream(ctx, messages.StreamDead)
	if err != nil {
		return nil, err
	}
	raw, err := s.GetMsg(ctx, seq)
	if err != nil {
		return nil, fmt.Errorf("dead letter %d: %w", seq, err)
	}
	text, _, _, ok := deadText(raw.Data)
	conv := messages.ConversationFromSubject(raw.Subject)
	if !ok || text == "" || messages.ValidateConversation(conv) != nil {
		return nil, ErrNotRedrivable
	}
	subject := messages.DeadSubject(conv)
	id := fmt.Sprintf("redrive-%d-%s", seq, nuid.Next())
	rec, _ := json.Marshal(Redrive{Redrive: seq, ResponseID: id, Forced: force})
	for attempt := 1; ; attempt++ {
		var opts []jetstream.PublishOpt
		if !force {
			last, err := c.redriven(ctx, s, subject, seq)
			if err != nil {
				return nil, err
			}
			opts = append(opts, jetstream.WithExpectLastSequencePerSubject(last))
		}
		_, err := c.JS.Publish(ctx, subject, rec, opts...)
		if err == nil {
			break
		}
		// Something was filed on the subject since the check (another redrive, or a
		// dead letter of the conversation): check again.
		if !wrongLastSequence(err) || attempt == 10 {
			return nil, fmt.Errorf("record the redrive of %d: %w", seq, err)
		}
	}
	return c.Client.Ask(ctx, conv, text, &client.SubmitOptions{ResponseID: id})
}

// redriven looks for a record of a redrive of the dead letter at seq among the messages
// filed on subject (its conversation's) after it: a *RedrivenError when there is one,
// else the subject's last sequence, which the new record expects.
func (c *Console) redriven(ctx context.Context, s jetstream.Stream, subject string, seq uint64) (uint64, error) {
	lastMsg, err := s.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		return 0, fmt.Errorf("dead letter %d: %w", seq, err)
	}
	last := lastMsg.Sequence
	var found *RedrivenError
	for next := seq + 1; next <= last; {
		m, err := s.GetMsg(ctx, next, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("the redrives of dead letter %d: %w", seq, err)
		}
		if m.Sequence > last {
			break
		}
		if r, ok := redriveOf(m.Data); ok && r.Redrive == seq {
			found = &RedrivenError{Seq: seq, ResponseID: r.ResponseID, Record: m.Sequence, At: m.Time}
		}
		next = m.Sequence + 1
	}
	if found != nil {
		return 0, found
	}
	return last, nil
}

// wrongLastSequence reports whether a publish was refused for its expected last
// sequence.
func wrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
