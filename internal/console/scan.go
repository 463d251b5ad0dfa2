package console

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultScanLimit bounds the messages one page of calls or dead letters, or one set of
// statistics, reads (Console.ScanLimit).
const DefaultScanLimit = 10000

// span is the part of a stream a view reads: the messages on a subject, stored in a
// time window and below a cursor.
type span struct {
	stream  jetstream.Stream
	subject string
	lo, hi  uint64 // the sequences to read: [lo, hi)
}

// window finds the sequences of stream's messages on subject stored from since until
// until (zero: either end open) and below before (0: none), with JetStream's own
// lookups: a consumer that starts at a time (DeliverByStartTime) delivers the first
// message on the subject at or after it.
func window(ctx context.Context, stream jetstream.Stream, subject string, since, until time.Time, before uint64) (span, error) {
	info, err := stream.Info(ctx)
	if err != nil {
		return span{}, err
	}
	sp := span{stream: stream, subject: subject, lo: max(info.State.FirstSeq, 1), hi: info.State.LastSeq + 1}
	if info.State.Msgs == 0 {
		sp.hi = sp.lo
		return sp, nil
	}
	if before != 0 {
		sp.hi = min(sp.hi, before)
	}
	for _, b := range []struct {
		at    time.Time
		bound *uint64
	}{{since, &sp.lo}, {until, &sp.hi}} {
		if b.at.IsZero() {
			continue
		}
		seq, err := firstAt(ctx, stream, subject, b.at)
		if err != nil {
			return span{}, err
		}
		if seq == 0 { // nothing on the subject from then on
			seq = info.State.LastSeq + 1
		}
		if b.bound == &sp.lo {
			sp.lo = max(sp.lo, seq)
		} else {
			sp.hi = min(sp.hi, seq)
		}
	}
	return sp, nil
}

// firstAt is the sequence of the first message on subject stored at or after t, 0 when
// there is none.
func firstAt(ctx context.Context, stream jetstream.Stream, subject string, t time.Time) (uint64, error) {
	cons, err := ephemeral(ctx, stream, jetstream.ConsumerConfig{FilterSubject: subject, DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &t})
	if err != nil {
		return 0, err
	}
	defer drop(stream, cons)
	batch, err := cons.FetchNoWait(1)
	if err != nil {
		return 0, err
	}
	for m := range batch.Messages() {
		if md, err := m.Metadata(); err == nil {
			return md.Sequence.Stream, nil
		}
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		return 0, err
	}
	return 0, nil
}

// ephemeral makes a consumer that delivers without acknowledgements and is forgotten
// soon after it is last used, should drop not reach the server.
func ephemeral(ctx context.Context, stream jetstream.Stream, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	cfg.AckPolicy, cfg.MemoryStorage, cfg.InactiveThreshold = jetstream.AckNonePolicy, true, 30*time.Second
	return stream.CreateConsumer(ctx, cfg)
}

// drop deletes a consumer ephemeral made.
func drop(stream jetstream.Stream, cons jetstream.Consumer) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = stream.DeleteConsumer(ctx, cons.CachedInfo().Name)
}

// back reads a span newest first, window by window, at most limit messages: each
// window is the messages on the subject in [start, hi), read oldest first by one
// consumer. A consumer's pending count, known when it is made, says how many messages
// on the subject a window holds before one is read, so that a window never holds more
// than the messages left to read: windows grow while the subject is sparse (a
// conversation among many) and shrink where it is dense, and the subject filter skips
// the other messages in the server.
type back struct {
	span
	left    int    // messages still to read
	above   uint64 // messages on the subject at hi and after
	counted bool   // above is known
	width   uint64 // the next window's span of sequences
	read    int
}

func (sp span) back(limit int) *back {
	return &back{span: sp, left: limit, width: 256}
}

// done reports whether the span is read to its start.
func (b *back) done() bool { return b.hi <= b.lo }

// next reads the next window, older than the last, calling visit with each message,
// oldest first. It returns false when nothing was read: the span is read to its start,
// or the limit is reached.
func (b *back) next(ctx context.Context, visit func(jetstream.Msg)) (bool, error) {
	if b.done() || b.left <= 0 {
		return false, nil
	}
	if !b.counted {
		n, err := b.pending(ctx, b.hi)
		if err != nil {
			return false, err
		}
		b.above, b.counted = n, true
	}
	start := b.lo
	if b.hi-b.lo > b.width {
		start = b.hi - b.width
	}
	var cons jetstream.Consumer
	for {
		c, err := ephemeral(ctx, b.stream, b.config(start))
		if err != nil {
			return false, err
		}
		n := c.CachedInfo().NumPending - min(b.above, c.CachedInfo().NumPending)
		if n <= uint64(b.left) || b.hi-start <= 1 {
			cons = c
			break
		}
		drop(b.stream, c)
		start = b.hi - (b.hi-start)/2 // too many for what is left to read: a narrower window
	}
	defer drop(b.stream, cons)
	pending := cons.CachedInfo().NumPending
	got := 0
read:
	for got < b.left {
		batch, err := cons.FetchNoWait(min(256, b.left-got))
		if err != nil {
			return false, err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			if md.Sequence.Stream >= b.hi {
				break read
			}
			got++
			visit(m)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return false, fmt.Errorf("%s: %w", b.subject, err)
		}
		if n == 0 {
			break
		}
	}
	b.read += got
	b.left -= got
	b.above, b.hi = pending, start
	if got < 64 {
		b.width *= 8
	} else {
		b.width *= 2
	}
	return true, nil
}

func (b *back) config(start uint64) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{FilterSubject: b.subject, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start}
}

// pending counts the messages on the subject from seq on.
func (b *back) pending(ctx context.Context, seq uint64) (uint64, error) {
	c, err := ephemeral(ctx, b.stream, b.config(seq))
	if err != nil {
		return 0, err
	}
	drop(b.stream, c)
	return c.CachedInfo().NumPending, nil
}
