package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/internal/bus"
	"github.com/toolbus/toolbus/internal/formatter"
	"github.com/toolbus/toolbus/pkg/messages"
)

// advisory is the part of JetStream's MAX_DELIVERIES and MSG_TERMINATED advisories the
// dead-letter handler reads.
type advisory struct {
	Type       string `json:"type"`
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
	Reason     string `json:"reason"`
}

// deadLetter is what the dead-letter stream keeps of a message that was given up.
type deadLetter struct {
	Stream     string          `json:"stream"`
	Sequence   uint64          `json:"sequence"`
	Subject    string          `json:"subject"`
	Header     nats.Header     `json:"header,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"`
	Text       string          `json:"text,omitempty"`
	Deliveries uint64          `json:"deliveries"`
	Reason     string          `json:"reason"`
	// Answer is what was published in its place, if anything.
	Answer any `json:"answer,omitempty"`
}

// RunDeadLetters consumes the advisories about toolbus messages that ran out of
// deliveries (their handler never finished: the service crashed on them, or they timed
// out every time) or were terminated, until ctx is done. For each it answers what can be
// answered — a call gets a final error result, a response an output saying why — copies
// the message with its history to the dead-letter stream and deletes it from its work
// queue, where it would otherwise stay for ever.
func (s *Service) RunDeadLetters(ctx context.Context) error {
	c, err := s.js.Consumer(ctx, messages.StreamAdvisories, messages.ConsumerDeadLetter)
	if err != nil {
		return fmt.Errorf("dead letters: %w", err)
	}
	return bus.Consume(ctx, c, s.handleAdvisory, bus.ConsumeOptions{Concurrency: 1, SpanName: "dead-letter", Tracer: s.opts.Tracer, Logger: s.opts.Logger})
}

func (s *Service) handleAdvisory(ctx context.Context, msg jetstream.Msg) error {
	var adv advisory
	if err := json.Unmarshal(msg.Data(), &adv); err != nil || adv.Stream == "" || adv.StreamSeq == 0 {
		return fmt.Errorf("undecodable advisory: %v", err)
	}
	stream, err := s.js.Stream(ctx, adv.Stream)
	if err != nil {
		return bus.Retry(err, s.opts.RedeliveryDelay)
	}
	raw, err := stream.GetMsg(ctx, adv.StreamSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil // handled after all (a late ack), or already moved aside
	}
	if err != nil {
		return bus.Retry(err, s.opts.RedeliveryDelay)
	}
	reason := fmt.Sprintf("no %s replica finished it in %d deliveries", adv.Consumer, adv.Deliveries)
	if adv.Reason != "" {
		reason = "terminated: " + adv.Reason
	}
	dl := deadLetter{Stream: adv.Stream, Sequence: adv.StreamSeq, Subject: raw.Subject, Header: raw.Header,
		Deliveries: adv.Deliveries, Reason: reason}
	if json.Valid(raw.Data) {
		dl.Data = raw.Data
	} else {
		dl.Text = string(raw.Data)
	}
	meta := metaOfRaw(raw)

	// Terminated messages were answered (or could not be) by their handler.
	if adv.Reason == "" {
		switch adv.Stream {
		case messages.StreamCalls:
			if dl.Answer, err = s.answerLostCall(ctx, meta, raw, reason); err != nil {
				return bus.Retry(err, s.opts.RedeliveryDelay)
			}
		case messages.StreamResponses:
			if dl.Answer, err = s.answerLostResponse(ctx, meta, raw, reason); err != nil {
				return bus.Retry(err, s.opts.RedeliveryDelay)
			}
		}
	}
	body, _ := json.Marshal(dl)
	conv := meta.Conversation
	if conv == "" {
		conv = "unknown"
	}
	m := bus.Meta{ResponseID: meta.ResponseID, Conversation: conv, MsgID: fmt.Sprintf("dead/%s/%d", adv.Stream, adv.StreamSeq)}
	if err := bus.Publish(ctx, s.js, messages.DeadSubject(conv), m, body); err != nil {
		return bus.Retry(err, s.opts.RedeliveryDelay)
	}
	if err := stream.DeleteMsg(ctx, adv.StreamSeq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return bus.Retry(err, s.opts.RedeliveryDelay)
	}
	s.opts.Logger.WarnContext(ctx, "message given up", "stream", adv.Stream, "seq", adv.StreamSeq, "reason", reason)
	return nil
}

func metaOfRaw(raw *jetstream.RawStreamMsg) bus.Meta {
	m := bus.Meta{
		ResponseID:   raw.Header.Get(messages.HeaderResponseID),
		Conversation: raw.Header.Get(messages.HeaderConversation),
		MsgID:        raw.Header.Get(messages.HeaderMsgID),
	}
	if m.Conversation == "" {
		m.Conversation = messages.ConversationFromSubject(raw.Subject)
	}
	return m
}

// answerLostCall publishes the final result of a call no executor finished: the stored
// result if there is one, else outcome_unknown when it was started (it may have run),
// else internal.
func (s *Service) answerLostCall(ctx context.Context, meta bus.Meta, raw *jetstream.RawStreamMsg, reason string) (*messages.ToolResult, error) {
	var call messages.ToolCall
	if err := messages.DecodeCall(raw.Data, &call); err != nil || call.ID == "" {
		return nil, nil // nothing to address a result to
	}
	claim, err := s.claims.Begin(ctx, call.ID)
	if err != nil {
		return nil, err
	}
	var res messages.ToolResult
	switch {
	case claim.Result != nil:
		res = *claim.Result
	case claim.Abandoned != nil:
		res = messages.ResultFor(call).Fail(messages.Errorf(messages.CodeOutcomeUnknown,
			"the call to %q was started but never finished (%s); it may or may not have taken effect, and it was not run again", call.Tool, reason))
	default:
		res = messages.ResultFor(call).Fail(messages.Errorf(messages.CodeInternal,
			"the call to %q could not be run (%s); it was not run", call.Tool, reason))
	}
	if err := s.claims.Finish(ctx, call.ID, res); err != nil {
		return nil, err
	}
	return &res, s.publish(ctx, meta, call, res)
}

// answerLostResponse publishes an output for a response the parser never finished, so
// the orchestrator is not left waiting.
func (s *Service) answerLostResponse(ctx context.Context, meta bus.Meta, raw *jetstream.RawStreamMsg, reason string) (*messages.Output, error) {
	id := meta.ResponseID
	if id == "" {
		id = meta.MsgID
	}
	if id == "" {
		id = fmt.Sprintf("%s-%d", meta.Conversation, raw.Sequence)
	}
	failed := messages.ToolResult{ResponseID: id, Conversation: meta.Conversation, Count: 1}.Fail(
		messages.Errorf(messages.CodeInternal, "toolbus could not process this response (%s); its tool calls were not run", reason))
	out := formatter.Render(id, meta.Conversation, []messages.ToolResult{failed})
	body, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	m := bus.Meta{ResponseID: id, Conversation: meta.Conversation, MsgID: id}
	if err := bus.Publish(ctx, s.js, messages.OutputSubject(meta.Conversation), m, body); err != nil {
		return nil, err
	}
	return &out, nil
}
