// Package ops answers the questions operators ask a running toolbus process: over HTTP,
// /healthz (the process is alive) and /readyz (it is connected to NATS, the streams and
// buckets exist, and its own checks pass — for the executor: its configuration is
// loaded); and over NATS, through the service framework nats.go/micro, which replicas
// run and how much they handled.
//
// # Micro services
//
// Each stage replica registers one micro service, "toolbus-<stage>" (toolbus-parser,
// toolbus-executor, toolbus-formatter, toolbus-healthd), so
//
//	nats micro ls                      # every replica, with its micro id
//	nats micro info toolbus-executor   # one replica: metadata and its stage's counts
//	nats micro stats toolbus-executor  # every replica's endpoint stats
//
// list every replica by its own id, with host and pid in its metadata. A stage does its
// work on JetStream consumers, not on a micro request endpoint, and micro keeps its own
// request counters private, fed only by requests to its endpoints. So each service has
// one endpoint, "status" on [messages.StatusSubject] (no queue group: every replica
// answers), whose reply is the replica's readiness and [StageStats], and the same
// StageStats fill the endpoint's "data" in `nats micro stats --json` and `nats micro
// info` ("Endpoint Specific Statistics"): messages handled, errors, last error, total
// and average processing time, and messages in flight. The plain `nats micro stats`
// table counts requests to the status endpoint itself.
//
//	nats req toolbus.status.executor '' --replies 0   # every executor replica's status
//
// A stage feeds its counts with [Stage.Wrap] around its bus handler, or [Stage.Observe].
//
// # Example
//
//	srv, err := ops.New(nc, &ops.Options{Addr: ":8081"})
//	if err != nil {
//		return err
//	}
//	srv.AddCheck("config", func(context.Context) error { return nil })
//	stage, err := srv.AddStage("executor", "runs tool calls")
//	if err != nil {
//		return err
//	}
//	handler = stage.Wrap(handler)
//	go srv.Run(ctx) // until ctx is done; then the micro services stop
package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Options configures a [Server]. The zero value means the defaults.
type Options struct {
	// Addr is where the HTTP server listens, e.g. ":8081"; port 0 picks a free one.
	// With AnyPortIfTaken, a port another process holds gives way to a free one (logged,
	// and registered in the micro metadata as "ops"): for default addresses, so that
	// services started side by side on one host need no flags.
	AnyPortIfTaken bool
	// Empty serves no HTTP (micro only).
	Addr string
	// Version of the micro services, semantic. Default "0.1.0".
	Version string
	// Streams and Buckets that must exist for the process to be ready. nil means every
	// toolbus stream and bucket; an empty slice, none.
	Streams []string
	Buckets []string
	// Metrics, when set, is served at /metrics (Prometheus text format).
	Metrics http.Handler
	// CheckTimeout bounds the readiness checks of one request. Default 2s.
	CheckTimeout time.Duration
	Logger       *slog.Logger
}

// Server is the ops side of one process.
type Server struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	opts Options
	log  *slog.Logger
	ln   net.Listener
	http *http.Server

	mu       sync.Mutex
	checks   []check
	stages   []*Stage
	breakers func() map[string]bool
	sessions func() map[string]int
}

// SetSessions makes the status replies of the process's first executor stage carry the
// conversations' MCP sessions open in the process, by server, as count returns them
// (the process's executor replicas share them).
func (s *Server) SetSessions(count func() map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions = count
}

// SetBreakers makes the executor stages' status replies carry the state of the
// executor's circuit breakers (server → open), as open returns it.
func (s *Server) SetBreakers(open func() map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.breakers = open
}

type check struct {
	name string
	fn   func(context.Context) error
}

// New returns the ops server of a process connected with nc, already listening on
// opts.Addr when set.
func New(nc *nats.Conn, opts *Options) (*Server, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Version == "" {
		o.Version = "0.1.0"
	}
	if o.Streams == nil {
		o.Streams = []string{messages.StreamResponses, messages.StreamCalls, messages.StreamResults,
			messages.StreamOutput, messages.StreamDead, messages.StreamAdvisories}
	}
	if o.Buckets == nil {
		o.Buckets = []string{messages.BucketSessions, messages.BucketOwners, messages.BucketCalls, messages.BucketHealth, messages.BucketAuth,
			messages.BucketCatalog, messages.BucketGather, messages.BucketLimits}
	}
	if o.CheckTimeout <= 0 {
		o.CheckTimeout = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	s := &Server{nc: nc, js: js, opts: o, log: o.Logger}
	if o.Addr != "" {
		s.ln, err = net.Listen("tcp", o.Addr)
		if err != nil && o.AnyPortIfTaken && errors.Is(err, syscall.EADDRINUSE) {
			host, _, _ := net.SplitHostPort(o.Addr)
			if s.ln, err = net.Listen("tcp", net.JoinHostPort(host, "0")); err == nil {
				s.log.Info("ops: the default address is taken; listening on a free port", "wanted", o.Addr, "addr", s.ln.Addr().String())
			}
		}
		if err != nil {
			return nil, fmt.Errorf("ops: %w", err)
		}
		s.http = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
	}
	return s, nil
}

// Addr is the address the HTTP server listens on, or "" without one.
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// AddCheck adds a readiness check: the process is ready only while fn returns nil.
func (s *Server) AddCheck(name string, fn func(ctx context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks = append(s.checks, check{name: name, fn: fn})
}

// Handler serves /healthz, /readyz and, when configured, /metrics.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	if s.opts.Metrics != nil {
		mux.Handle("GET /metrics", s.opts.Metrics)
	}
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		rd := s.Ready(r.Context())
		code := http.StatusOK
		if !rd.Ready {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, rd)
	})
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Readiness is the answer of /readyz.
type Readiness struct {
	Ready  bool          `json:"ready"`
	Checks []CheckResult `json:"checks"`
}

// CheckResult is one readiness check.
type CheckResult struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// Ready runs every readiness check: NATS connected, the streams and buckets present,
// then the checks added with [Server.AddCheck].
func (s *Server) Ready(ctx context.Context) Readiness {
	ctx, cancel := context.WithTimeout(ctx, s.opts.CheckTimeout)
	defer cancel()
	s.mu.Lock()
	checks := append([]check{{"nats", s.natsConnected}, {"jetstream", s.streamsPresent}}, s.checks...)
	s.mu.Unlock()
	rd := Readiness{Ready: true}
	for _, c := range checks {
		res := CheckResult{Name: c.name, OK: true}
		if err := c.fn(ctx); err != nil {
			res.OK, res.Error, rd.Ready = false, err.Error(), false
		}
		rd.Checks = append(rd.Checks, res)
	}
	return rd
}

// natsConnected asks the server for a round trip: a connection the client has not yet
// seen drop (a server gone a moment ago, a half-open socket) fails here too.
func (s *Server) natsConnected(ctx context.Context) error {
	if !s.nc.IsConnected() {
		return fmt.Errorf("not connected (%s)", s.nc.Status())
	}
	if err := s.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("no answer from the server: %w", err)
	}
	return nil
}

func (s *Server) streamsPresent(ctx context.Context) error {
	if !s.nc.IsConnected() {
		return errors.New("NATS is not connected")
	}
	var missing []string
	for _, name := range s.opts.Streams {
		if _, err := s.js.Stream(ctx, name); err != nil {
			missing = append(missing, "stream "+name+": "+err.Error())
		}
	}
	for _, name := range s.opts.Buckets {
		if _, err := s.js.KeyValue(ctx, name); err != nil {
			missing = append(missing, "bucket "+name+": "+err.Error())
		}
	}
	if len(missing) > 0 {
		return errors.New(strings.Join(missing, "; "))
	}
	return nil
}

// Run serves HTTP until ctx is done, then shuts the HTTP server down and stops the
// micro services. Without an address it only waits for ctx.
func (s *Server) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	if s.http != nil {
		go func() { errc <- s.http.Serve(s.ln) }()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	if s.http != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.http.Shutdown(sctx)
		cancel()
	}
	s.mu.Lock()
	stages := s.stages
	s.mu.Unlock()
	for _, st := range stages {
		if stopErr := st.svc.Stop(); stopErr != nil {
			s.log.Warn("ops: stopping micro service", "stage", st.name, "err", stopErr)
		}
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// StageStats counts the messages a stage replica handled.
type StageStats struct {
	Handled   int64  `json:"handled"`
	Errors    int64  `json:"errors"`
	LastError string `json:"last_error,omitempty"`
	// ProcessingTime and AverageProcessingTime are nanoseconds, as in micro's stats.
	ProcessingTime        time.Duration `json:"processing_time"`
	AverageProcessingTime time.Duration `json:"average_processing_time"`
	InFlight              int64         `json:"in_flight"`
}

// Stage is one stage replica: its micro service and its counts.
type Stage struct {
	name string
	srv  *Server
	svc  micro.Service

	mu    sync.Mutex
	stats StageStats
}

// StatusReply answers a request on the status endpoint.
type StatusReply struct {
	Stage string     `json:"stage"`
	ID    string     `json:"id"`
	Ready Readiness  `json:"ready"`
	Stats StageStats `json:"stats"`
	// Breakers, on an executor's reply, says for each MCP server whether the
	// executor's circuit breaker is open (its calls refused at once).
	Breakers map[string]bool `json:"breakers,omitempty"`
	// Sessions, on the reply of a process's first executor stage, counts the
	// conversations' sessions open in the process, by conversation-scoped MCP server.
	Sessions map[string]int `json:"sessions,omitempty"`
}

// AddStage registers a stage replica as the micro service "toolbus-<name>". Call it
// once per replica: each gets its own micro id.
func (s *Server) AddStage(name, description string) (*Stage, error) {
	st := &Stage{name: name, srv: s}
	host, _ := os.Hostname()
	if description == "" {
		description = "toolbus " + name
	}
	svc, err := micro.AddService(s.nc, micro.Config{
		Name:               "toolbus-" + name,
		Version:            s.opts.Version,
		Description:        description,
		Metadata:           map[string]string{"stage": name, "host": host, "pid": strconv.Itoa(os.Getpid()), "ops": st.srv.Addr()},
		QueueGroupDisabled: true,
		StatsHandler:       func(*micro.Endpoint) any { return st.Stats() },
	})
	if err != nil {
		return nil, fmt.Errorf("ops: micro service for %s: %w", name, err)
	}
	err = svc.AddEndpoint("status", micro.HandlerFunc(st.status),
		micro.WithEndpointSubject(messages.StatusSubject(name)),
		micro.WithEndpointMetadata(map[string]string{"description": "readiness and message counts of this replica"}))
	if err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("ops: micro endpoint for %s: %w", name, err)
	}
	st.svc = svc
	s.mu.Lock()
	s.stages = append(s.stages, st)
	s.mu.Unlock()
	return st, nil
}

// ID is the replica's micro service id.
func (st *Stage) ID() string { return st.svc.Info().ID }

func (st *Stage) status(req micro.Request) {
	reply := StatusReply{Stage: st.name, ID: st.ID(), Ready: st.srv.Ready(context.Background()), Stats: st.Stats()}
	st.srv.mu.Lock()
	open, sessions := st.srv.breakers, st.srv.sessions
	first := false
	for _, other := range st.srv.stages {
		if other.name == st.name {
			first = other == st
			break
		}
	}
	st.srv.mu.Unlock()
	if open != nil && st.name == "executor" {
		reply.Breakers = open()
	}
	if sessions != nil && st.name == "executor" && first {
		reply.Sessions = sessions()
	}
	_ = req.RespondJSON(reply)
}

// Observe counts one handled message that took d and ended with err.
func (st *Stage) Observe(d time.Duration, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.stats.Handled++
	st.stats.ProcessingTime += d
	st.stats.AverageProcessingTime = st.stats.ProcessingTime / time.Duration(st.stats.Handled)
	if err != nil {
		st.stats.Errors++
		st.stats.LastError = err.Error()
	}
}

// Wrap returns h counted: each message's duration, its error and the messages in
// flight. It changes nothing of h's ack contract.
func (st *Stage) Wrap(h bus.Handler) bus.Handler {
	return func(ctx context.Context, d *bus.Delivery) ([]bus.Outgoing, error) {
		st.mu.Lock()
		st.stats.InFlight++
		st.mu.Unlock()
		start := time.Now()
		out, err := h(ctx, d)
		st.mu.Lock()
		st.stats.InFlight--
		st.mu.Unlock()
		st.Observe(time.Since(start), err)
		return out, err
	}
}

// Stats returns the stage's counts so far.
func (st *Stage) Stats() StageStats {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.stats
}
