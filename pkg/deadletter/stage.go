// Package deadletter is the stage that answers what the other stages gave up on. It
// reads JetStream's advisories of toolbus messages that ran out of deliveries (their
// handler never finished: the service crashed on them, or they timed out every time) or
// were terminated, and for each answers what can be answered — a call gets its final
// result, a response an output saying why — copies the message with its history to the
// dead-letter stream, and then deletes it from its work queue, where it would otherwise
// stay for ever.
package deadletter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/claims"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Advisory is the part of JetStream's MAX_DELIVERIES and MSG_TERMINATED advisories the
// stage reads.
type Advisory struct {
	Type       string `json:"type"`
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
	Reason     string `json:"reason"`
}

// Store reads and deletes the messages advisories name.
type Store interface {
	// Get returns the message at seq of stream, or jetstream.ErrMsgNotFound.
	Get(ctx context.Context, stream string, seq uint64) (*jetstream.RawStreamMsg, error)
	// Delete removes it; a message already gone is not an error.
	Delete(ctx context.Context, stream string, seq uint64) error
}

// Stage is the dead-letter stage.
type Stage struct {
	Messages Store
	Claims   claims.Store
	// RetryDelay is the delay of an advisory handed back after a failure. Default 2s.
	RetryDelay time.Duration
}

// Decode reads an advisory.
func Decode(d *bus.Delivery) (Advisory, error) {
	var adv Advisory
	if err := json.Unmarshal(d.Data, &adv); err != nil {
		return adv, err
	}
	if adv.Stream == "" || adv.StreamSeq == 0 {
		return adv, errors.New("an advisory that names no message")
	}
	return adv, nil
}

// Handle answers the message adv names and returns the answer and the dead-letter copy;
// the message is deleted from its stream once both are stored.
func (s *Stage) Handle(ctx context.Context, adv Advisory, d *bus.Delivery) ([]bus.Outgoing, error) {
	raw, err := s.Messages.Get(ctx, adv.Stream, adv.StreamSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil // handled after all (a late ack), or already moved aside
	}
	if err != nil {
		return nil, bus.Retry(err, s.retryDelay())
	}
	reason := fmt.Sprintf("no %s replica finished it in %d deliveries", adv.Consumer, adv.Deliveries)
	if adv.Reason != "" {
		reason = "terminated: " + adv.Reason
	}
	dl := messages.NewDeadLetter(adv.Stream, adv.StreamSeq, raw.Subject, raw.Header, raw.Data, adv.Deliveries, reason)
	meta := metaOfRaw(raw)

	var out []bus.Outgoing
	// Terminated messages were answered (or could not be) by their handler.
	if adv.Reason == "" {
		var answer *bus.Outgoing
		switch {
		case adv.Stream == messages.StreamCalls:
			answer, dl.Answer, err = s.lostCall(ctx, raw, reason)
		case messages.IsResponseStream(adv.Stream):
			answer, dl.Answer, err = lostResponse(meta, raw, reason)
		case messages.IsChunkStream(adv.Stream):
			answer, dl.Answer, err = lostChunk(meta, raw, reason)
		}
		if err != nil {
			return nil, bus.Retry(err, s.retryDelay())
		}
		if answer != nil {
			out = append(out, *answer)
		}
	}
	copy := bus.DeadCopy(dl, meta)
	d.OnPublished(func(ctx context.Context) error { return s.Messages.Delete(ctx, adv.Stream, adv.StreamSeq) })
	return append(out, copy), nil
}

func metaOfRaw(raw *jetstream.RawStreamMsg) bus.Meta { return bus.MetaFrom(raw.Subject, raw.Header) }

// lostCall is the final result of a call no executor finished: the stored result if
// there is one, else outcome_unknown when it was started (it may have run), else
// internal.
func (s *Stage) lostCall(ctx context.Context, raw *jetstream.RawStreamMsg, reason string) (*bus.Outgoing, any, error) {
	var call messages.ToolCall
	if err := messages.DecodeCall(raw.Data, &call); err != nil || call.ID == "" {
		return nil, nil, nil // nothing to address a result to
	}
	digest := claims.Digest(call.Tool, call.Arguments)
	claim, err := s.Claims.Begin(ctx, call.ID, digest)
	if err != nil {
		return nil, nil, err
	}
	var res messages.ToolResult
	switch {
	case claim.Result != nil && claims.Same(claim.Digest, digest):
		res = *claim.Result
	case claim.Result != nil:
		// Its id answered another call (its response's id was used before): that
		// call's result stays stored, and this one was not run.
		res = messages.ResultFor(call).Fail(messages.Errorf(messages.CodeNotAllowed,
			"the call to %q was not run: its id %q already answered another call (its response's id was used before)", call.Tool, call.ID))
	case claim.Abandoned != nil:
		res = messages.ResultFor(call).Fail(messages.Errorf(messages.CodeOutcomeUnknown,
			"the call to %q was started but never finished (%s); it may or may not have taken effect, and it was not run again", call.Tool, reason))
	default:
		res = messages.ResultFor(call).Fail(messages.Errorf(messages.CodeInternal,
			"the call to %q could not be run (%s); it was not run", call.Tool, reason))
	}
	if claims.Same(claim.Digest, digest) {
		if err := s.Claims.Finish(ctx, call.ID, digest, res); err != nil {
			return nil, nil, err
		}
	}
	out, err := bus.JSON(messages.ResultSubject(call.Conversation), bus.Meta{ResponseID: call.ResponseID,
		Conversation: call.Conversation, MsgID: call.ID, Index: call.Index, Count: call.Count, Next: call.Next}, res)
	return &out, res, err
}

// lostResponse is the output of a response the parser never finished, so that the
// orchestrator is not left waiting.
func lostResponse(meta bus.Meta, raw *jetstream.RawStreamMsg, reason string) (*bus.Outgoing, any, error) {
	id := meta.ResponseIDAt(raw.Sequence)
	res := messages.RefusedOutput(id, meta.Conversation,
		messages.Errorf(messages.CodeInternal, "toolbus could not process this response (%s); its tool calls were not run", reason))
	out, err := bus.JSON(messages.OutputSubject(meta.Conversation), bus.Meta{ResponseID: id, Conversation: meta.Conversation, MsgID: messages.ScopedID(meta.Conversation, id)}, res)
	return &out, res, err
}

// lostChunk is the output of a streamed response one of whose chunks the parser never
// read: the response cannot be read whole, so that it is answered with an error (the
// calls released before the chunk may have run; the output says so).
func lostChunk(meta bus.Meta, raw *jetstream.RawStreamMsg, reason string) (*bus.Outgoing, any, error) {
	if meta.ResponseID == "" {
		return nil, nil, nil // nothing to address an output to
	}
	res := messages.RefusedOutput(meta.ResponseID, meta.Conversation,
		messages.Errorf(messages.CodeInternal, "toolbus could not read chunk %s of this streamed response (%s); the calls it had released before may have run, the others were not run",
			raw.Header.Get(messages.HeaderChunk), reason))
	out, err := bus.JSON(messages.OutputSubject(meta.Conversation), bus.Meta{ResponseID: meta.ResponseID, Conversation: meta.Conversation,
		MsgID: messages.ScopedID(meta.Conversation, meta.ResponseID)}, res)
	return &out, res, err
}

// Streams reads and deletes messages of JetStream streams.
type Streams struct{ JS jetstream.StreamManager }

// Get implements [Store].
func (s Streams) Get(ctx context.Context, stream string, seq uint64) (*jetstream.RawStreamMsg, error) {
	st, err := s.JS.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	return st.GetMsg(ctx, seq)
}

// Delete implements [Store].
func (s Streams) Delete(ctx context.Context, stream string, seq uint64) error {
	st, err := s.JS.Stream(ctx, stream)
	if err != nil {
		return err
	}
	if err := st.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return err
	}
	return nil
}

func (s *Stage) retryDelay() time.Duration {
	if s.RetryDelay > 0 {
		return s.RetryDelay
	}
	return 2 * time.Second
}
