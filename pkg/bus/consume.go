package bus

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/telemetry"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Delivery is one message of a stage's consumer as the stage sees it: its body, its
// routing metadata and where it stands among its deliveries.
type Delivery struct {
	Subject string
	Header  nats.Header
	Data    []byte
	Meta    Meta
	// Sequence is the message's sequence in its stream.
	Sequence uint64
	// Delivered counts the deliveries of the message, this one included.
	Delivered int
	// Last is set on the last delivery the consumer allows (its MaxDeliver): a stage
	// that hands the message back now loses it to the dead-letter stage.
	Last bool

	published []func(context.Context) error
}

// OnPublished asks the runner to call f once every message the handler returned is
// stored, before the delivery is acknowledged: for a clean-up that must not happen
// unless the handler's messages are safe (the dead-letter stage deletes the message it
// answered). An error from f hands the delivery back.
func (d *Delivery) OnPublished(f func(context.Context) error) {
	d.published = append(d.published, f)
}

// Published calls, in order, what [Delivery.OnPublished] asked for, until one fails: the
// runner calls it once the delivery's messages are stored (a stage's test in its place).
func (d *Delivery) Published(ctx context.Context) error {
	for _, f := range d.published {
		if err := f(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Handler is a stage: it handles one delivery and returns the messages it produces. It
// knows nothing of NATS. Its return decides what [Run] does:
//
//   - nil error: out is published (each message de-duplicated by its Meta.MsgID), and
//     once the streams acknowledged every one, the delivery is acknowledged. When a
//     publish fails the delivery is handed back instead; the message ids make the
//     repeated publishes of the next delivery no-ops.
//   - an error wrapping a [*RetryError]: nothing is published; the delivery is handed
//     back with the error's delay, for this or another replica to try again.
//   - any other error: out is dropped; a copy of the message ([messages.DeadLetter],
//     with the error as its reason) is published to the dead-letter stream on
//     toolbus.dead.<conversation> ("unknown" when it has none a subject can carry) and,
//     once stored, the delivery is acknowledged: never redelivered, never lost. A
//     stage returns it only for a message no answer can be written for. When the
//     message is an orchestrator's (a response or a chunk), its sender is told too: the
//     same copy goes, on core NATS, to [messages.RejectedSubject] (its tenant's
//     toolbus.rejected.<tenant>), the one subject of it the sender may read.
//   - a panic: handled as a retry after a second, so one bad message cannot crash a
//     service.
//
// The context carries the message's trace and is cancelled when the drain timeout after
// shutdown has passed.
type Handler func(ctx context.Context, d *Delivery) (out []Outgoing, err error)

// Middleware wraps a stage's handler, for counting or logging; it must keep the ack
// contract of [Handler].
type Middleware func(Handler) Handler

// Decoded makes a [Handler] of a stage that takes a decoded message: decode reads the
// delivery (an error terminates it: no answer can be written for a message nobody can
// read), then stage handles the value.
func Decoded[In any](decode func(*Delivery) (In, error), stage func(context.Context, In, *Delivery) ([]Outgoing, error)) Handler {
	return func(ctx context.Context, d *Delivery) ([]Outgoing, error) {
		in, err := decode(d)
		if err != nil {
			return nil, fmt.Errorf("undecodable message on %s: %w", d.Subject, err)
		}
		return stage(ctx, in, d)
	}
}

// RetryError asks for redelivery after Delay.
type RetryError struct {
	Delay time.Duration
	Err   error
}

func (e *RetryError) Error() string { return fmt.Sprintf("retry in %v: %v", e.Delay, e.Err) }
func (e *RetryError) Unwrap() error { return e.Err }

// Retry wraps err so that [Run] hands the message back after delay.
func Retry(err error, delay time.Duration) error { return &RetryError{Delay: delay, Err: err} }

// RunOptions tunes [Run]. The zero value handles one message at a time.
type RunOptions struct {
	// Concurrency is the number of messages handled at once. Default 1.
	Concurrency int
	// Heartbeat, when set, marks a message in progress at this interval while its handler
	// runs, so a long handler does not see the message redelivered. Use about a third of
	// the consumer's AckWait.
	Heartbeat time.Duration
	// DrainTimeout bounds how long in-flight handlers may run after ctx is done. Default 10s.
	DrainTimeout time.Duration
	// FetchWait is how long one pull request waits for messages. Default 5s.
	FetchWait time.Duration
	// Prefetch, when set, keeps up to this many messages buffered in the client beyond
	// the ones being handled, so that the next message is there when a worker frees up,
	// as long as handlers are fast; see [Run]. Zero pulls only what free workers can take.
	Prefetch int
	// SlowAfter is how long the runner waits for a free worker while streaming before
	// it considers the handlers slow and stops buffering. Default 50ms.
	SlowAfter time.Duration
	// PublishRetryDelay is the delay of a delivery handed back because publishing what
	// its handler produced failed. Default 1s.
	PublishRetryDelay time.Duration
	// PublishTimeout bounds the wait for the streams to acknowledge what a handler
	// produced. Default 5s.
	PublishTimeout time.Duration
	// AckHold bounds how long the acknowledgement of the newest handled delivery waits
	// for the next delivery to be handled (see [Run]). Default 20ms, at most a tenth of
	// the consumer's AckWait; negative acknowledges each delivery at once, as does a
	// consumer whose MaxAckPending is no more than Concurrency.
	AckHold time.Duration
	// SpanName names the stage in metrics, e.g. "parse". Each message's handling is a
	// span "process <destination template>" continuing the trace the message carries
	// (see DestinationTemplate); Tracer nil means the global tracer provider.
	SpanName string
	Tracer   trace.Tracer
	// Untraced: no span per message. The handler records what it does in spans of its
	// own (a streamed response's chunks: one span per response, not one per chunk); the
	// message's trace context is still passed on to what it publishes.
	Untraced bool
	// Middleware, when set, wraps the handler (stats, for example).
	Middleware Middleware
	// Metrics, when set, counts each message by outcome and times it, as stage SpanName.
	Metrics *telemetry.Metrics
	Logger  *slog.Logger
}

// runner is one [Run]'s state.
type runner struct {
	o          RunOptions
	h          Handler
	js         jetstream.Publisher
	consumer   string
	streamName string
	maxDeliver int
	// beatEvery is the interval of the heartbeats of messages held for a worker.
	beatEvery time.Duration
	// ackHold is RunOptions.AckHold bounded by the consumer's AckWait; 0 acknowledges at once.
	ackHold time.Duration
	log     *slog.Logger
	// acks carries handled deliveries whose outgoing messages are being published, in
	// the order they were handled, to the goroutine that acks them.
	acks chan pending
}

// pending is a handled delivery waiting for the stream acks of what it produced.
type pending struct {
	ctx     context.Context
	msg     jetstream.Msg
	span    trace.Span
	start   time.Time
	d       *Delivery
	futures []jetstream.PubAckFuture
	err     error // a publish that failed before it left
}

// Run feeds the messages of c to h until ctx is done, publishes what h returns on js,
// and acknowledges, hands back or terminates each message as [Handler] says. Then it
// stops fetching, waits for in-flight handlers up to the drain timeout and returns.
// Messages not acknowledged by then are redelivered by JetStream after AckWait.
//
// Without Prefetch it pulls only as many messages as it has free handlers: a message
// buffered in the client would have its ack timer running while nobody works on it, and
// would count against the consumer's MaxAckPending, starving other replicas. With
// Prefetch it keeps messages buffered while handlers are fast, which saves the server
// round trip per pull that otherwise bounds a busy stage, and falls back to pulling
// only for free workers when they turn slow. A handler's worker is free again as soon
// as its messages are sent: their stream acks are awaited, and the delivery
// acknowledged, by one goroutine in the order the deliveries were handled. That
// goroutine holds the acknowledgement of the newest delivery until the next one is
// handled (at most AckHold), so that a busy work queue does not drain between
// messages; see [runner.acker].
func Run(ctx context.Context, c jetstream.Consumer, js jetstream.Publisher, h Handler, o RunOptions) error {
	if o.Concurrency <= 0 {
		o.Concurrency = 1
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 10 * time.Second
	}
	if o.FetchWait <= 0 {
		o.FetchWait = 5 * time.Second
	}
	if o.PublishRetryDelay <= 0 {
		o.PublishRetryDelay = time.Second
	}
	if o.PublishTimeout <= 0 {
		o.PublishTimeout = 5 * time.Second
	}
	if o.SlowAfter <= 0 {
		o.SlowAfter = 50 * time.Millisecond
	}
	if o.Tracer == nil {
		o.Tracer = telemetry.Tracer(nil)
	}
	if o.SpanName == "" {
		o.SpanName = "process"
	}
	if o.Middleware != nil {
		h = o.Middleware(h)
	}
	r := &runner{o: o, h: h, js: js, log: o.Logger, acks: make(chan pending, 4*o.Concurrency)}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	info := c.CachedInfo()
	r.consumer, r.streamName, r.maxDeliver = info.Name, info.Stream, info.Config.MaxDeliver
	r.beatEvery = cmp.Or(o.Heartbeat, max(info.Config.AckWait/3, 100*time.Millisecond))
	r.ackHold = ackHold(o, info.Config)

	handlerCtx, cancelHandlers := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHandlers()
	ackerDone := make(chan struct{})
	go func() { defer close(ackerDone); r.acker() }()

	// The handlers are long-lived workers rather than a goroutine per message: a worker
	// keeps the stack its handler grew to (schema validation and JSON decoding recurse),
	// where a new goroutine would grow and copy its stack for every message.
	sem := make(chan struct{}, o.Concurrency)
	work := make(chan jetstream.Msg)
	var wg sync.WaitGroup
	for range o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for msg := range work {
				r.handle(handlerCtx, msg)
				<-sem
			}
		}()
	}
	r.pull(ctx, c, sem, work)
	close(work)

	done := make(chan struct{})
	go func() { wg.Wait(); close(r.acks); <-ackerDone; close(done) }()
	select {
	case <-done:
	case <-time.After(o.DrainTimeout):
		cancelHandlers()
		<-done
	}
	return nil
}

// ackHold is how long the acker may hold an ack for a consumer cfg (see
// [runner.acker]): RunOptions.AckHold (default 20ms), at most a tenth of AckWait, and
// none when the consumer's MaxAckPending leaves no room for a held message beside a
// message for every worker (the held one would keep the next from being delivered).
func ackHold(o RunOptions, cfg jetstream.ConsumerConfig) time.Duration {
	if o.AckHold < 0 || cfg.MaxAckPending > 0 && cfg.MaxAckPending <= max(o.Concurrency, 1) {
		return 0
	}
	hold := cmp.Or(o.AckHold, 20*time.Millisecond)
	if cfg.AckWait > 0 {
		hold = min(hold, cfg.AckWait/10)
	}
	return hold
}

// fetch pulls messages for free workers until ctx is done: each pull request asks for
// as many messages as there are free workers at that moment.
func (r *runner) fetch(ctx context.Context, c jetstream.Consumer, sem chan struct{}, work chan<- jetstream.Msg) {
	failures := 0
	for ctx.Err() == nil {
		// Wait for one free handler, then take every other free one.
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		free := 1
		for free < r.o.Concurrency {
			select {
			case sem <- struct{}{}:
				free++
				continue
			default:
			}
			break
		}
		if r.o.Prefetch > 0 && free == r.o.Concurrency {
			// Every worker is free: the slow handlers are done, stream again.
			for ; free > 0; free-- {
				<-sem
			}
			return
		}
		fctx, cancel := context.WithTimeout(ctx, r.o.FetchWait)
		batch, err := c.Fetch(free, jetstream.FetchContext(fctx))
		if err == nil {
			for msg := range batch.Messages() {
				free--
				work <- msg
			}
			err = batch.Error()
		}
		cancel()
		for ; free > 0; free-- {
			<-sem
		}
		if err != nil && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
			// The server is away (restart, leader change): back off, keep trying.
			failures++
			r.log.Warn("fetch failed", "err", err, "failures", failures)
			select {
			case <-ctx.Done():
			case <-time.After(min(time.Duration(failures)*100*time.Millisecond, 2*time.Second)):
			}
			continue
		}
		failures = 0
	}
}

// pull feeds free workers until ctx is done. With Prefetch, messages stream in (a pull
// iterator keeps up to Prefetch buffered) as long as the workers keep up. When no worker
// frees up within SlowAfter, the handlers have turned slow: a buffered message would
// wait behind them with its ack timer running while other replicas may be idle. The
// iterator is then drained, the messages it held are kept in progress (heartbeats) and
// handed to the next free workers, and pulling falls back to asking only for free
// workers until a pull finds every worker free again.
func (r *runner) pull(ctx context.Context, c jetstream.Consumer, sem chan struct{}, work chan<- jetstream.Msg) {
	for ctx.Err() == nil {
		if r.o.Prefetch > 0 {
			r.stream(ctx, c, sem, work)
		}
		r.fetch(ctx, c, sem, work)
	}
}

// stream hands the messages of a pull iterator to free workers until ctx is done or the
// workers turn slow.
func (r *runner) stream(ctx context.Context, c jetstream.Consumer, sem chan struct{}, work chan<- jetstream.Msg) {
	it, err := c.Messages(jetstream.PullMaxMessages(r.o.Prefetch), jetstream.PullThresholdMessages(max(1, r.o.Prefetch*3/4)),
		jetstream.PullExpiry(r.o.FetchWait))
	if err != nil {
		r.log.Warn("pull failed", "err", err)
		return
	}
	defer context.AfterFunc(ctx, it.Stop)()
	slow := time.NewTimer(r.o.SlowAfter)
	defer slow.Stop()
	for ctx.Err() == nil {
		slow.Reset(r.o.SlowAfter)
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			continue
		case <-slow.C:
			r.log.Debug("handlers slow: pulling only for free workers")
			it.Drain()
			r.handOver(ctx, it, sem, work)
			return
		}
		msg, err := it.Next()
		if err != nil {
			<-sem
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return
			}
			// Heartbeats missed or the connection away: the iterator keeps trying.
			r.log.Debug("pull", "err", err)
			continue
		}
		work <- msg
	}
	it.Stop()
}

// handOver gives the messages a drained iterator still holds to the next free workers,
// marking them in progress while they wait.
func (r *runner) handOver(ctx context.Context, it jetstream.MessagesContext, sem chan struct{}, work chan<- jetstream.Msg) {
	var held []jetstream.Msg
	for {
		// Bounded: a drain needs the server, which may be away. What is left in the
		// iterator then is redelivered after AckWait, never handled here.
		msg, err := it.Next(jetstream.NextMaxWait(r.o.SlowAfter))
		if err != nil {
			it.Stop()
			break
		}
		held = append(held, msg)
	}
	if len(held) == 0 {
		return
	}
	var mu sync.Mutex
	waiting := held
	beat := time.NewTicker(r.beatEvery)
	stop := make(chan struct{})
	go func() {
		defer beat.Stop()
		for {
			select {
			case <-stop:
				return
			case <-beat.C:
				mu.Lock()
				for _, m := range waiting {
					_ = m.InProgress()
				}
				mu.Unlock()
			}
		}
	}()
	defer close(stop)
	for len(held) > 0 {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return // not acknowledged: redelivered after AckWait
		}
		msg := held[0]
		held = held[1:]
		mu.Lock()
		waiting = held
		mu.Unlock()
		work <- msg
	}
}

// delivery reads what a stage needs of msg.
func (r *runner) delivery(msg jetstream.Msg) *Delivery {
	d := &Delivery{Subject: msg.Subject(), Header: msg.Headers(), Data: msg.Data(), Meta: MetaOf(msg), Delivered: 1}
	if md, err := msg.Metadata(); err == nil {
		d.Sequence, d.Delivered = md.Sequence.Stream, int(md.NumDelivered)
	}
	d.Last = r.maxDeliver > 0 && d.Delivered >= r.maxDeliver
	return d
}

// handle runs the handler on msg and sends what it returned; the acker settles it.
func (r *runner) handle(ctx context.Context, msg jetstream.Msg) {
	d := r.delivery(msg)
	ctx, span := startConsumeSpan(ctx, r.o.Tracer, r.o.Untraced, r.consumer, d)
	p := pending{ctx: ctx, msg: msg, span: span, start: time.Now(), d: d}
	beats := r.heartbeat(msg)
	out, err := safeHandle(ctx, d, r.h)
	beats.stop()
	var retry *RetryError
	if err != nil && !errors.As(err, &retry) {
		// A message that cannot be answered is moved to the dead-letter stream, with
		// what is known of it, and acknowledged once it is stored there: terminating it
		// would delete it from its work queue, unseen.
		// The error may quote what a model wrote: logs and spans get it cut.
		r.log.ErrorContext(ctx, "dead-lettering a message that cannot be answered", "subject", d.Subject, "err", messages.EchoError(err.Error()))
		p.span.SetStatus(codes.Error, messages.EchoError(err.Error()))
		out, err = []Outgoing{deadLetter(r.streamName, d, err)}, nil
		r.reject(ctx, d, out[0])
	}
	if retry != nil {
		r.settle(p, retry)
		return
	}
	// Sent now, acknowledged by the streams while this worker takes the next message.
	for _, o := range out {
		m := &nats.Msg{Subject: o.Subject, Header: o.Meta.Header(), Data: o.Body}
		InjectTrace(ctx, m.Header)
		f, perr := r.js.PublishMsgAsync(m)
		if perr != nil {
			p.err = fmt.Errorf("publish %s: %w", o.Subject, perr)
			break
		}
		p.futures = append(p.futures, f)
	}
	r.acks <- p
}

// reject tells the sender of a response or chunk that cannot be answered why, on its
// tenant's rejection subject (messages.RejectedSubject): the dead-letter copy dead,
// with the response id it named. Core NATS, not a stream: nobody's stream holds these
// subjects, and the copy is kept in the dead-letter stream already. A delivery handed
// back after this (the copy not stored) tells it again.
func (r *runner) reject(ctx context.Context, d *Delivery, dead Outgoing) {
	subject := messages.RejectedSubject(d.Subject)
	if subject == "" {
		return
	}
	conn, ok := r.js.(interface{ Conn() *nats.Conn })
	if !ok || conn.Conn() == nil {
		return
	}
	m := &nats.Msg{Subject: subject, Header: Meta{ResponseID: d.Meta.ResponseID, Conversation: d.Meta.Conversation}.Header(), Data: dead.Body}
	InjectTrace(ctx, m.Header)
	if err := conn.Conn().PublishMsg(m); err != nil {
		r.log.WarnContext(ctx, "the sender of a message that cannot be answered could not be told", "subject", subject, "err", err)
	}
}

// deadLetter is the copy of a delivery that cannot be answered, for the dead-letter
// stream: on its conversation's dead subject ("unknown" when it has none that a subject
// can carry), de-duplicated by its stream and sequence.
func deadLetter(stream string, d *Delivery, err error) Outgoing {
	return DeadCopy(messages.NewDeadLetter(stream, d.Sequence, d.Subject, d.Header, d.Data, uint64(d.Delivered),
		"cannot be answered: "+messages.EchoError(err.Error())), d.Meta)
}

// DeadCopy is the message that files dl in the dead-letter stream, on its conversation's
// dead subject, de-duplicated by its stream and sequence.
func DeadCopy(dl messages.DeadLetter, m Meta) Outgoing {
	body, _ := json.Marshal(dl) // a DeadLetter always encodes
	subject := messages.DeadSubject(m.Conversation)
	return Outgoing{Subject: subject, Body: body, Meta: Meta{ResponseID: m.ResponseID, Conversation: messages.ConversationFromSubject(subject),
		MsgID: fmt.Sprintf("dead/%s/%d", dl.Stream, dl.Sequence)}}
}

// acker waits for the stream acks of each handled delivery's messages, in order, and
// then acknowledges the delivery (or hands it back when a publish failed).
//
// The acknowledgement of the newest delivery is held until the next handled delivery
// reaches the acker, or for at most [RunOptions.AckHold]: a work queue then still holds
// a message (the next one, not yet acknowledged) whenever one is removed, as long as
// messages keep coming. nats-server's file store deletes the file of a stream's last
// block when its last message is removed and creates a new one for the next message —
// an unlink, an open and a tombstone per message on a queue that drains between
// messages, which is what a busy pipeline's queues do. What the held delivery produced
// is stored already: an ack lost with the process means a redelivery after AckWait,
// handled as any lost ack is (the same message ids published again, no-ops); holding
// widens the window in which a crash loses the ack from a round trip to AckHold.
func (r *runner) acker() {
	timeout := time.NewTimer(0)
	hold := time.NewTimer(0)
	hold.Stop()
	var held pending // held.msg nil: none
	release := func() {
		if held.msg != nil {
			hold.Stop()
			r.ack(held)
			held = pending{}
		}
	}
	defer release()
	for {
		var p pending
		select {
		case <-hold.C:
			release()
			continue
		case next, ok := <-r.acks:
			if !ok {
				return
			}
			p = next
		}
		// p is in its stream, not yet acknowledged: the held delivery can go.
		release()
		err := p.err
		// A stream ack may never come (its leader died with the publish): the delivery
		// is handed back after PublishTimeout, and the message ids make the next
		// delivery's publishes no-ops where the first ones were stored after all.
		timeout.Reset(r.o.PublishTimeout)
		for _, f := range p.futures {
			if err != nil {
				break
			}
			select {
			case <-f.Ok():
			case perr := <-f.Err():
				err = fmt.Errorf("publish %s: %w", f.Msg().Subject, perr)
			case <-timeout.C:
				err = fmt.Errorf("publish %s: no ack from the stream within %v", f.Msg().Subject, r.o.PublishTimeout)
			case <-p.ctx.Done():
				err = p.ctx.Err()
			}
		}
		if !timeout.Stop() {
			select {
			case <-timeout.C:
			default:
			}
		}
		if err == nil {
			err = p.d.Published(p.ctx)
		}
		if err != nil {
			r.settle(p, &RetryError{Delay: r.o.PublishRetryDelay, Err: err})
			continue
		}
		r.settle(p, nil)
		if r.ackHold > 0 {
			held = p
			hold.Reset(r.ackHold)
			continue
		}
		r.ack(p)
	}
}

// ack acknowledges a delivery [runner.settle] settled as handled.
func (r *runner) ack(p pending) {
	if aerr := p.msg.Ack(); aerr != nil {
		r.log.WarnContext(p.ctx, "ack failed; the message will be redelivered", "subject", p.d.Subject, "err", aerr)
	}
}

// settle ends a handled delivery's span and metrics and, with retry set, hands it back
// after retry's delay. A delivery handled without error is acknowledged by the caller,
// with [runner.ack] (the acker may hold it). The runner never terminates a delivery: a
// message that cannot be answered is dead-lettered, then acknowledged.
func (r *runner) settle(p pending, retry *RetryError) {
	defer p.span.End()
	outcome := "ack"
	if retry != nil {
		outcome = "retry"
	}
	r.o.Metrics.Handled(p.ctx, r.o.SpanName, outcome, time.Since(p.start), uint64(p.d.Delivered))
	if retry == nil {
		return
	}
	reason := messages.EchoError(retry.Err.Error())
	p.span.SetStatus(codes.Error, messages.EchoError(retry.Error()))
	p.span.SetAttributes(telemetry.RetryReason.String(reason))
	r.log.InfoContext(p.ctx, "handing message back", "subject", p.d.Subject, "delay", retry.Delay, "err", reason)
	_ = p.msg.NakWithDelay(retry.Delay)
}

// heartbeat marks msg in progress every RunOptions.Heartbeat until the returned beater
// is stopped. A timer rather than a goroutine with a ticker: most handlers finish long
// before the first beat, and then the timer only has to be stopped.
func (r *runner) heartbeat(msg jetstream.Msg) *beater {
	if r.o.Heartbeat <= 0 {
		return nil
	}
	b := &beater{msg: msg, every: r.o.Heartbeat}
	b.mu.Lock()
	b.t = time.AfterFunc(b.every, b.beat)
	b.mu.Unlock()
	return b
}

// beater tells the server, every interval, that a message is still being handled, until
// stopped. One value per message (closures over its fields took twice the allocations).
type beater struct {
	msg     jetstream.Msg
	every   time.Duration
	mu      sync.Mutex
	stopped bool
	t       *time.Timer
}

func (b *beater) beat() {
	_ = b.msg.InProgress()
	b.mu.Lock()
	if !b.stopped {
		b.t.Reset(b.every)
	}
	b.mu.Unlock()
}

// stop ends the heartbeats; a nil beater has none.
func (b *beater) stop() {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.stopped = true
	b.t.Stop()
	b.mu.Unlock()
}

// safeHandle turns a handler panic into a retry.
func safeHandle(ctx context.Context, d *Delivery, h Handler) (out []Outgoing, err error) {
	defer func() {
		if rec := recover(); rec != nil {
			out, err = nil, Retry(fmt.Errorf("handler panic: %v", rec), time.Second)
		}
	}()
	return h(ctx, d)
}
