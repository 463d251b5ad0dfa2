package console

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/messages"
)

// DeadLetter is one message of the dead-letter stream.
type DeadLetter struct {
	Sequence     uint64    `json:"sequence"`
	Conversation string    `json:"conversation"`
	At           time.Time `json:"at"`
	// Kind is "call" (a call that ran out of deliveries) or "message" (a message no
	// stage finished).
	Kind   string `json:"kind"`
	Tool   string `json:"tool,omitempty"`
	Server string `json:"server,omitempty"`
	Reason string `json:"reason"`
	// Redrivable: a call or a response that can be sent again.
	Redrivable bool `json:"redrivable"`
	// Redriven is the response id of the newest redrive of this dead letter ("" when
	// none): a second redrive must be forced (ForceRedrive). Redrive tells what it did.
	Redriven string          `json:"redriven,omitempty"`
	Redrive  *RedriveResult  `json:"redrive,omitempty"`
	Body     json.RawMessage `json:"body"`
}

// RedriveResult is the newest redrive of a dead letter: its record, and the calls of
// the output it was answered with.
type RedriveResult struct {
	Redrive
	// At is when it was recorded, Record its record's sequence in the dead-letter stream.
	At     time.Time `json:"at"`
	Record uint64    `json:"record"`
	// Output holds the calls of the redriven response's output; none while it is not
	// stored (or no longer kept).
	Output []Call `json:"output,omitempty"`
}

// DeadFilter narrows the dead letters: by tenant ("" every one), conversation, tool,
// server and the time they were filed (Since, Until; zero: open), at most Limit
// (default 50) of the newest, below Cursor (a page's Next).
type DeadFilter struct {
	Tenant, Conversation, Tool, Server string
	Since, Until                       time.Time
	Cursor                             uint64
	Limit                              int
}

// DeadPage is one page of dead letters, newest first; its fields are CallPage's.
type DeadPage struct {
	Letters []DeadLetter `json:"letters"`
	Next    uint64       `json:"next,omitempty"`
	Scanned int          `json:"scanned"`
	Limit   int          `json:"limit"`
	Oldest  time.Time    `json:"oldest,omitzero"`
	Notice  string       `json:"notice,omitempty"`
}

// Dead returns the newest dead letters (at most 200), newest first.
func (c *Console) Dead(ctx context.Context) ([]DeadLetter, error) {
	page, err := c.DeadLetters(ctx, DeadFilter{Limit: 200})
	return page.Letters, err
}

// DeadLetters returns a page of the dead letters the filter selects, newest first, as
// FindCalls does the calls: it reads the dead-letter stream on the filter's subject
// (the conversation's, the tenant's), at most Console.ScanLimit messages. The records
// of redrives are no dead letters: each letter tells its newest redrive instead, and
// what it was answered with.
func (c *Console) DeadLetters(ctx context.Context, f DeadFilter) (DeadPage, error) {
	limit := cmp.Or(f.Limit, 50)
	page := DeadPage{Letters: []DeadLetter{}, Limit: c.scanLimit()}
	subject := messages.AllDead
	switch {
	case f.Conversation != "":
		if err := messages.ValidateConversation(f.Conversation); err != nil {
			return page, fmt.Errorf("%w: %w", ErrFilter, err)
		}
		subject = messages.DeadSubject(f.Conversation)
	case f.Tenant != "":
		if err := messages.ValidateTenant(f.Tenant); err != nil {
			return page, fmt.Errorf("%w: %w", ErrFilter, err)
		}
		subject = strings.TrimSuffix(messages.AllDead, ">") + f.Tenant + ".*" // DeadSubject takes no wildcard
	}
	s, err := c.JS.Stream(ctx, messages.StreamDead)
	if err != nil {
		return page, err
	}
	sp, err := window(ctx, s, subject, f.Since, f.Until, f.Cursor)
	if err != nil {
		return page, err
	}
	names := c.names(ctx)
	b := sp.back(page.Limit)
	full := false
	for !full {
		var win []DeadLetter // oldest first
		ok, err := b.next(ctx, func(m jetstream.Msg) {
			md, err := m.Metadata()
			if err != nil {
				return
			}
			page.Oldest = md.Timestamp.UTC()
			if dl, ok := c.deadLetter(m, md, names); ok && (f.Tool == "" || names.same(dl.Tool, f.Tool)) && (f.Server == "" || dl.Server == f.Server) {
				win = append(win, dl)
			}
		})
		if err != nil {
			return page, err
		}
		if !ok {
			break
		}
		for i := len(win) - 1; i >= 0; i-- {
			if len(page.Letters) == limit {
				page.Next, full = page.Letters[limit-1].Sequence, true
				break
			}
			page.Letters = append(page.Letters, win[i])
		}
	}
	page.Scanned = b.read
	if !full && !b.done() {
		page.Next = b.hi
		if len(page.Letters) < limit {
			page.Notice = fmt.Sprintf("this page read %d messages of the dead-letter stream, the most one page reads, back to %s, and found %d dead letters: older ones remain (next page: cursor %d)",
				b.read, page.Oldest.Format(time.RFC3339), len(page.Letters), page.Next)
		}
	}
	for i := range page.Letters {
		if dl := &page.Letters[i]; dl.Redrivable {
			if dl.Redrive, err = c.redriveResult(ctx, s, dl.Sequence, names); err != nil {
				return page, err
			}
			if dl.Redrive != nil {
				dl.Redriven = dl.Redrive.ResponseID
			}
		}
	}
	return page, nil
}

// deadLetter reads one message of the dead-letter stream; false for a record of a
// redrive.
func (c *Console) deadLetter(m jetstream.Msg, md *jetstream.MsgMetadata, names *names) (DeadLetter, bool) {
	if messages.IsRedriveSubject(m.Subject()) {
		return DeadLetter{}, false
	}
	if _, ok := redriveOf(m.Data()); ok {
		return DeadLetter{}, false // a record filed, before, on the conversation's subject
	}
	dl := DeadLetter{Sequence: md.Sequence.Stream, Conversation: messages.ConversationFromSubject(m.Subject()), At: md.Timestamp.UTC()}
	if body, err := json.Marshal(c.Redact.String(string(m.Data()))); err == nil {
		dl.Body = body // as text, its secrets hidden
	}
	if text, tool, reason, ok := deadText(m.Data()); ok {
		dl.Kind, dl.Reason, dl.Redrivable = "call", reason, text != ""
		if tool == "" {
			dl.Kind = "message"
		} else {
			dl.Tool, dl.Server = names.resolve(tool)
		}
	} else {
		dl.Kind, dl.Reason = "message", "unreadable"
	}
	dl.Reason = c.Redact.String(dl.Reason)
	return dl, true
}

// redriveResult is the newest redrive of the dead letter at seq and its output; nil
// when it was not redriven.
func (c *Console) redriveResult(ctx context.Context, s jetstream.Stream, seq uint64, names *names) (*RedriveResult, error) {
	m, err := s.GetLastMsgForSubject(ctx, messages.RedriveSubject(seq))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the redrives of dead letter %d: %w", seq, err)
	}
	r, _ := redriveOf(m.Data)
	res := &RedriveResult{Redrive: r, At: m.Time.UTC(), Record: m.Sequence}
	if messages.ValidateConversation(r.Conversation) != nil {
		return res, nil
	}
	// The output was stored after the record: the first outputs of the conversation
	// from then on hold it.
	out, err := c.JS.Stream(ctx, messages.OutputStream(messages.Tenant(r.Conversation)))
	if err != nil {
		return res, nil
	}
	at := m.Time
	cons, err := ephemeral(ctx, out, jetstream.ConsumerConfig{FilterSubject: messages.OutputSubject(r.Conversation), DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &at})
	if err != nil {
		return res, nil
	}
	defer drop(out, cons)
	batch, err := cons.FetchNoWait(64)
	if err != nil {
		return res, nil
	}
	for m := range batch.Messages() {
		md, _ := m.Metadata()
		if calls := c.calls(m, md, CallFilter{Response: r.ResponseID}, names); len(calls) > 0 && res.Output == nil {
			res.Output = calls
		}
	}
	return res, nil
}

// deadCount counts the dead letters: the dead-letter stream's messages but the records
// of redrives.
func deadCount(ctx context.Context, s jetstream.Stream) (uint64, error) {
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(messages.AllRedrives))
	if err != nil {
		return 0, err
	}
	n := info.State.Msgs
	for _, records := range info.State.Subjects {
		n -= min(n, records)
	}
	return n, nil
}

// Redrive is what the dead-letter stream records of a message sent again, on
// messages.RedriveSubject of the dead letter, before it is sent.
type Redrive struct {
	Redrive      uint64 `json:"redrive"` // the dead letter's sequence
	Conversation string `json:"conversation,omitempty"`
	ResponseID   string `json:"response_id"`
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
// response of its conversation with a new id, records that in the dead-letter stream
// (messages.RedriveSubject), and returns the new response's output. A dead letter is redriven
// once: when the stream records a redrive of seq already, Redrive sends nothing and
// returns a *RedrivenError (ErrRedriven). The record and the check are one step: the
// record is published only if its subject holds none yet (JetStream's expected last
// sequence per subject, 0), so two redrives at once send the call once.
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
	if !ok || text == "" || messages.ValidateConversation(conv) != nil || messages.IsRedriveSubject(raw.Subject) {
		return nil, ErrNotRedrivable
	}
	id := fmt.Sprintf("redrive-%d-%s", seq, nuid.Next())
	rec, _ := json.Marshal(Redrive{Redrive: seq, Conversation: conv, ResponseID: id, Forced: force})
	var opts []jetstream.PublishOpt
	if !force {
		opts = append(opts, jetstream.WithExpectLastSequencePerSubject(0)) // no record yet
	}
	if _, err := c.JS.Publish(ctx, messages.RedriveSubject(seq), rec, opts...); err != nil {
		if !wrongLastSequence(err) {
			return nil, fmt.Errorf("record the redrive of %d: %w", seq, err)
		}
		last, err := s.GetLastMsgForSubject(ctx, messages.RedriveSubject(seq))
		if err != nil {
			return nil, fmt.Errorf("the redrives of dead letter %d: %w", seq, err)
		}
		r, _ := redriveOf(last.Data)
		return nil, &RedrivenError{Seq: seq, ResponseID: r.ResponseID, Record: last.Sequence, At: last.Time}
	}
	return c.Client.Ask(ctx, conv, text, &client.SubmitOptions{ResponseID: id})
}

// wrongLastSequence reports whether a publish was refused for its expected last
// sequence.
func wrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
