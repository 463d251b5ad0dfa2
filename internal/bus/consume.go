package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/internal/telemetry"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Handler handles one message. Its return decides the message's fate:
//
//   - nil: the message is acknowledged.
//   - an error wrapping a [*RetryError]: the message is handed back with the error's
//     delay, for this or another replica to try again.
//   - any other error: the message is terminated (never redelivered) and the error logged.
//     Handlers return it only for a message no answer can be written for.
//
// The context is cancelled when the drain timeout after shutdown has passed.
type Handler func(ctx context.Context, msg jetstream.Msg) error

// RetryError asks for redelivery after Delay.
type RetryError struct {
	Delay time.Duration
	Err   error
}

func (e *RetryError) Error() string { return fmt.Sprintf("retry in %v: %v", e.Delay, e.Err) }
func (e *RetryError) Unwrap() error { return e.Err }

// Retry wraps err so that [Consume] hands the message back after delay.
func Retry(err error, delay time.Duration) error { return &RetryError{Delay: delay, Err: err} }

// ConsumeOptions tunes [Consume]. The zero value handles one message at a time.
type ConsumeOptions struct {
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
	// SpanName names the span of each message's handling, e.g. "parse"; it continues the
	// trace the message carries. Tracer nil means the global tracer provider.
	SpanName string
	Tracer   trace.Tracer
	// Middleware, when set, wraps the handler (stats, for example).
	Middleware func(Handler) Handler
	// Metrics, when set, counts each message by outcome and times it, as stage SpanName.
	Metrics *telemetry.Metrics
	Logger  *slog.Logger

	consumer string
}

// Consume feeds the messages of c to h until ctx is done, then stops fetching, waits for
// in-flight handlers up to the drain timeout and returns. Messages not acknowledged by
// then are redelivered by JetStream after AckWait.
//
// It pulls only as many messages as it has free handlers: a message buffered in the
// client would have its ack timer running while nobody works on it, and would count
// against the consumer's MaxAckPending, starving other replicas.
func Consume(ctx context.Context, c jetstream.Consumer, h Handler, o ConsumeOptions) error {
	if o.Concurrency <= 0 {
		o.Concurrency = 1
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 10 * time.Second
	}
	if o.FetchWait <= 0 {
		o.FetchWait = 5 * time.Second
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
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
	consumer := c.CachedInfo().Name
	o.consumer = consumer
	handlerCtx, cancelHandlers := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHandlers()

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
				handleOne(handlerCtx, msg, h, o, log)
				<-sem
			}
		}()
	}
	failures := 0
	for ctx.Err() == nil {
		// Wait for one free handler, then take every other free one.
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		free := 1
		for free < o.Concurrency {
			select {
			case sem <- struct{}{}:
				free++
				continue
			default:
			}
			break
		}
		fctx, cancel := context.WithTimeout(ctx, o.FetchWait)
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
			log.Warn("fetch failed", "err", err, "failures", failures)
			select {
			case <-ctx.Done():
			case <-time.After(min(time.Duration(failures)*100*time.Millisecond, 2*time.Second)):
			}
			continue
		}
		failures = 0
	}
	close(work)

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(o.DrainTimeout):
		cancelHandlers()
		<-done
	}
	return nil
}

func handleOne(ctx context.Context, msg jetstream.Msg, h Handler, o ConsumeOptions, log *slog.Logger) {
	ctx, span := startConsumeSpan(ctx, o.Tracer, o.SpanName, o.consumer, msg)
	defer span.End()
	if heartbeat := o.Heartbeat; heartbeat > 0 {
		// A timer rather than a goroutine with a ticker: most handlers finish long before
		// the first beat, and then the timer only has to be stopped.
		var mu sync.Mutex
		stopped := false
		var t *time.Timer
		beat := func() {
			_ = msg.InProgress()
			mu.Lock()
			if !stopped {
				t.Reset(heartbeat)
			}
			mu.Unlock()
		}
		mu.Lock()
		t = time.AfterFunc(heartbeat, beat)
		mu.Unlock()
		defer func() {
			mu.Lock()
			stopped = true
			t.Stop()
			mu.Unlock()
		}()
	}
	start := time.Now()
	err := safeHandle(ctx, msg, h)
	var delivery uint64
	if md, mdErr := msg.Metadata(); mdErr == nil {
		delivery = md.NumDelivered
	}
	var retry *RetryError
	outcome := "ack"
	switch {
	case errors.As(err, &retry):
		outcome = "retry"
	case err != nil:
		outcome = "term"
	}
	o.Metrics.Handled(ctx, o.SpanName, outcome, time.Since(start), delivery)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	switch {
	case err == nil:
		if aerr := msg.Ack(); aerr != nil {
			log.WarnContext(ctx, "ack failed; the message will be redelivered", "subject", msg.Subject(), "err", aerr)
		}
	case errors.As(err, &retry):
		span.SetAttributes(telemetry.RetryReason.String(retry.Err.Error()))
		log.InfoContext(ctx, "handing message back", "subject", msg.Subject(), "delay", retry.Delay, "err", retry.Err)
		_ = msg.NakWithDelay(retry.Delay)
	default:
		log.ErrorContext(ctx, "dropping message that cannot be answered", "subject", msg.Subject(), "err", err)
		_ = msg.TermWithReason(err.Error())
	}
}

// safeHandle turns a handler panic into a retry, so one bad message cannot crash a service.
func safeHandle(ctx context.Context, msg jetstream.Msg, h Handler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = Retry(fmt.Errorf("handler panic: %v", r), time.Second)
		}
	}()
	return h(ctx, msg)
}
