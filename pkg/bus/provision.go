package bus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Topology is the shape of toolbus's streams, consumers and buckets. The zero value is
// filled with [Topology.withDefaults]: one replica, file storage.
type Topology struct {
	// Replicas of every stream and bucket: 1 embedded, 3 on a cluster.
	Replicas int
	// Memory keeps streams in memory instead of files (tests, benchmarks).
	Memory bool
	// OutputMaxAge is how long outputs are kept for orchestrators to read. Default 24h.
	OutputMaxAge time.Duration
	// DeadMaxAge is how long dead calls are kept. Default 7 days.
	DeadMaxAge time.Duration
	// DuplicateWindow is JetStream's de-duplication window on Nats-Msg-Id. Default 10m.
	DuplicateWindow time.Duration
	// AckWait before an unacknowledged message is redelivered. Default 30s.
	AckWait time.Duration
	// MaxDeliver bounds the deliveries of one message. Default 5.
	MaxDeliver int
	// MaxAckPending bounds the messages in flight per consumer. Default 1024.
	MaxAckPending int
	// GatherTTL is how long the formatter keeps partial results, and a response's key
	// (with the mark of the message that first used its id) is kept. Default the larger
	// of 1h and six duplicate windows: the mark outlives the window, so a response id
	// sent again after it is known as used (and refused), never run as new.
	GatherTTL time.Duration
	// Tenants besides the default one, each with a stream of its own for its outputs
	// and progress (messages.OutputStream) and a bucket of its own for its stored
	// results (messages.ResultsBucket): what a tenant's orchestrator reads, and nobody
	// else's.
	Tenants []Tenant
}

// Tenant is one tenant of a deployment (messages.ValidateTenant) and its storage limit.
type Tenant struct {
	Name string
	// MaxBytes bounds each of the tenant's output stream and results bucket; 0: no
	// limit but the server's. A full output stream drops its oldest outputs; a full
	// bucket refuses to store, and a result too large to travel inline is then
	// answered with its preview only.
	MaxBytes int64
	// MaxConsumers bounds the consumers on the tenant's output stream (its
	// orchestrator's own, durable or not). Default DefaultTenantConsumers.
	MaxConsumers int
}

// DefaultTenantConsumers is a tenant's [Tenant.MaxConsumers] unless configured: many
// more than an orchestrator's readers need, few enough that one tenant cannot load the
// servers with consumers.
const DefaultTenantConsumers = 1000

func (t Topology) withDefaults() Topology {
	if t.Replicas <= 0 {
		t.Replicas = 1
	}
	if t.OutputMaxAge <= 0 {
		t.OutputMaxAge = 24 * time.Hour
	}
	if t.DeadMaxAge <= 0 {
		t.DeadMaxAge = 7 * 24 * time.Hour
	}
	if t.DuplicateWindow <= 0 {
		t.DuplicateWindow = 10 * time.Minute
	}
	if t.AckWait <= 0 {
		t.AckWait = 30 * time.Second
	}
	if t.MaxDeliver <= 0 {
		t.MaxDeliver = 5
	}
	if t.MaxAckPending <= 0 {
		t.MaxAckPending = 1024
	}
	if t.GatherTTL <= 0 {
		t.GatherTTL = max(time.Hour, 6*t.DuplicateWindow)
	}
	return t
}

// Streams returns the configuration of every toolbus stream.
func (t Topology) Streams() []jetstream.StreamConfig {
	t = t.withDefaults()
	storage := jetstream.FileStorage
	if t.Memory {
		storage = jetstream.MemoryStorage
	}
	work := func(name, subject, desc string) jetstream.StreamConfig {
		return jetstream.StreamConfig{
			Name: name, Description: desc, Subjects: []string{subject},
			Retention: jetstream.WorkQueuePolicy, Storage: storage, Replicas: t.Replicas,
			Duplicates: t.DuplicateWindow, Discard: jetstream.DiscardOld,
		}
	}
	// Each tenant's outputs and progress in a stream of its own; the default tenant's
	// conversations are those of one token.
	output := func(tenant Tenant) jetstream.StreamConfig {
		s := work(messages.OutputStream(tenant.Name), "", "toolbus outputs, one per response, and the progress of streamed responses")
		if tenant.Name != "" {
			s.Description += ", of tenant " + tenant.Name
		}
		s.Retention, s.MaxAge, s.MaxBytes = jetstream.LimitsPolicy, t.OutputMaxAge, max(tenant.MaxBytes, 0)
		if s.MaxBytes == 0 {
			s.MaxBytes = -1
		}
		if tenant.Name != "" {
			s.MaxConsumers = cmp.Or(tenant.MaxConsumers, DefaultTenantConsumers)
		}
		s.Subjects = []string{messages.TenantSubjects(messages.OutputSubject, tenant.Name), messages.TenantSubjects(messages.ProgressSubject, tenant.Name)}
		return s
	}
	dead := work(messages.StreamDead, messages.AllDead, "toolbus calls that exhausted their deliveries")
	dead.Retention, dead.MaxAge = jetstream.LimitsPolicy, t.DeadMaxAge
	advisories := work(messages.StreamAdvisories, "", "toolbus: advisories of messages that ran out of deliveries")
	var tenants []string
	for _, tenant := range t.Tenants {
		tenants = append(tenants, tenant.Name)
	}
	advisories.Subjects = messages.AdvisorySubjects(tenants...)
	// Each tenant's responses, whole and chunk by chunk, in queues of its own: JetStream
	// de-duplicates by message id per stream, so no tenant can take another's response
	// id first (the default tenant's conversations are those of one token).
	responses := func(tenant string) []jetstream.StreamConfig {
		desc := ""
		if tenant != "" {
			desc = ", of tenant " + tenant
		}
		return []jetstream.StreamConfig{
			work(messages.ResponseStream(tenant), messages.TenantSubjects(messages.ResponseSubject, tenant), "toolbus: LLM responses to parse"+desc),
			work(messages.ChunkStream(tenant), messages.TenantSubjects(messages.StreamSubject, tenant), "toolbus: chunks of LLM responses being written"+desc),
		}
	}
	streams := []jetstream.StreamConfig{
		advisories,
		responses("")[0], responses("")[1],
		work(messages.StreamCalls, messages.AllCalls, "toolbus: tool calls to execute"),
		work(messages.StreamResults, messages.AllResults, "toolbus: tool results to format"),
		output(Tenant{}),
		dead,
	}
	for _, tenant := range t.Tenants {
		streams = append(streams, responses(tenant.Name)...)
		streams = append(streams, output(tenant))
	}
	return streams
}

// Consumers returns the shared durable consumer of each stage, by stream.
func (t Topology) Consumers() map[string]jetstream.ConsumerConfig {
	t = t.withDefaults()
	c := func(name, desc string) jetstream.ConsumerConfig {
		return jetstream.ConsumerConfig{
			Durable: name, Description: desc, AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: t.AckWait, MaxDeliver: t.MaxDeliver, MaxAckPending: t.MaxAckPending,
			DeliverPolicy: jetstream.DeliverAllPolicy,
		}
	}
	consumers := map[string]jetstream.ConsumerConfig{
		messages.StreamResponses:  c(messages.ConsumerParser, "toolbus parser replicas"),
		messages.StreamChunks:     c(messages.ConsumerParser, "toolbus parser replicas (streamed responses)"),
		messages.StreamCalls:      c(messages.ConsumerExecutor, "toolbus executor replicas"),
		messages.StreamResults:    c(messages.ConsumerFormatter, "toolbus formatter replicas"),
		messages.StreamAdvisories: c(messages.ConsumerDeadLetter, "toolbus dead-letter handlers (in the executors)"),
	}
	for _, tenant := range t.Tenants {
		consumers[messages.ResponseStream(tenant.Name)] = c(messages.ConsumerParser, "toolbus parser replicas, tenant "+tenant.Name)
		consumers[messages.ChunkStream(tenant.Name)] = c(messages.ConsumerParser, "toolbus parser replicas (streamed responses), tenant "+tenant.Name)
	}
	return consumers
}

// Buckets returns the configuration of every key-value bucket.
func (t Topology) Buckets() []jetstream.KeyValueConfig {
	t = t.withDefaults()
	storage := jetstream.FileStorage
	if t.Memory {
		storage = jetstream.MemoryStorage
	}
	kv := func(name, desc string, ttl time.Duration) jetstream.KeyValueConfig {
		return jetstream.KeyValueConfig{
			Bucket: name, Description: desc, TTL: ttl, Storage: storage, Replicas: t.Replicas, History: 1,
		}
	}
	return []jetstream.KeyValueConfig{
		kv(messages.BucketSessions, "conversation → engineering session", 0),
		kv(messages.BucketCalls, "call id → claim and result", t.DuplicateWindow*6),
		// A conversation's record outlives its sessions (sessionIdle) so that the next
		// call can say the state was reset; a day without a change forgets it.
		kv(messages.BucketOwners, "server and conversation → executor holding its MCP session", 24*time.Hour),
		kv(messages.BucketHealth, "server → last probe", 0),
		kv(messages.BucketCatalog, "server → tools", 0),
		kv(messages.BucketAuth, "server → OAuth grant (sealed)", 0),
		kv(messages.BucketGather, "response id → results gathered so far", t.GatherTTL),
		// A count is forgotten a day after its last change: no limit's interval is longer
		// (policy.MaxInterval).
		kv(messages.BucketLimits, "limit and tenant, conversation, server or tool → calls counted in its window", 24*time.Hour),
		// A call waits at most a day for a decision (policy.MaxApprovalTimeout); what was
		// decided stays listed for a week.
		kv(messages.BucketApprovals, "approval id → a call waiting for a person's decision, and the decision", 7*24*time.Hour),
	}
}

// ObjectStores returns the configuration of every object store bucket: the results too
// large to travel inline, kept as long as outputs are.
func (t Topology) ObjectStores() []jetstream.ObjectStoreConfig {
	t = t.withDefaults()
	storage := jetstream.FileStorage
	if t.Memory {
		storage = jetstream.MemoryStorage
	}
	results := func(tenant Tenant) jetstream.ObjectStoreConfig {
		c := jetstream.ObjectStoreConfig{
			Bucket: messages.ResultsBucket(tenant.Name), Description: "call id → a whole result too large to travel inline",
			TTL: t.OutputMaxAge, Storage: storage, Replicas: t.Replicas, MaxBytes: max(tenant.MaxBytes, 0),
		}
		if tenant.Name != "" {
			c.Description += ", of tenant " + tenant.Name
		}
		if c.MaxBytes == 0 {
			c.MaxBytes = -1
		}
		return c
	}
	stores := []jetstream.ObjectStoreConfig{results(Tenant{})}
	for _, tenant := range t.Tenants {
		stores = append(stores, results(tenant))
	}
	return stores
}

// Serves reports whether conversation belongs to one of t's tenants: the default one,
// or one in Tenants.
func (t Topology) Serves(conversation string) bool {
	tenant := messages.Tenant(conversation)
	return tenant == "" || slices.ContainsFunc(t.Tenants, func(x Tenant) bool { return x.Name == tenant })
}

// TenantNames are the names of t's tenants, the default one ("") first.
func (t Topology) TenantNames() []string {
	names := []string{""}
	for _, tenant := range t.Tenants {
		names = append(names, tenant.Name)
	}
	return names
}

// Provision creates or updates every stream, consumer and bucket of t. It is safe to run
// from every replica of every service at the same time.
func Provision(ctx context.Context, js jetstream.JetStream, t Topology) error {
	for _, cfg := range t.Streams() {
		if err := retryRace(ctx, func() error {
			_, err := js.CreateOrUpdateStream(ctx, cfg)
			return err
		}); err != nil {
			return fmt.Errorf("provision stream %s: %w", cfg.Name, Explain(js.Conn(), err))
		}
	}
	for stream, cfg := range t.Consumers() {
		if err := retryRace(ctx, func() error {
			_, err := js.CreateOrUpdateConsumer(ctx, stream, cfg)
			return err
		}); err != nil {
			return fmt.Errorf("provision consumer %s on %s: %w", cfg.Durable, stream, Explain(js.Conn(), err))
		}
	}
	for _, cfg := range t.Buckets() {
		if err := retryRace(ctx, func() error {
			_, err := js.CreateOrUpdateKeyValue(ctx, cfg)
			return err
		}); err != nil {
			return fmt.Errorf("provision bucket %s: %w", cfg.Bucket, Explain(js.Conn(), err))
		}
	}
	for _, cfg := range t.ObjectStores() {
		if err := retryRace(ctx, func() error {
			_, err := js.CreateOrUpdateObjectStore(ctx, cfg)
			return err
		}); err != nil {
			return fmt.Errorf("provision object store %s: %w", cfg.Bucket, Explain(js.Conn(), err))
		}
	}
	return nil
}

// retryRace retries f when a concurrent replica created the same object between f's
// update and create steps.
func retryRace(ctx context.Context, f func() error) error {
	var err error
	for range 5 {
		if err = f(); err == nil || !raced(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return err
}

func raced(err error) bool {
	return errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) ||
		errors.Is(err, jetstream.ErrConsumerExists) ||
		errors.Is(err, jetstream.ErrBucketExists)
}

// Check verifies, without changing anything, that every stream, consumer and bucket of t
// exists and that the settings the pipeline relies on match (subjects and retention of
// streams, the stream of buckets, ack policy, deliveries and ack wait of consumers). Its
// error names every one missing or different, so that a service started before
// provisioning (`toolbus provision`) says exactly what it lacks. When NATS refuses the
// connection's credentials or a right to look, that is the error (an AccessError, see
// Explain), not ErrNotProvisioned: nothing can be told about what exists.
func Check(ctx context.Context, js jetstream.JetStream, t Topology) error {
	var problems []string
	var refused error
	missing := func(what string, err error) {
		if errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
			errors.Is(err, jetstream.ErrBucketNotFound) {
			problems = append(problems, what+" is missing")
		} else if err = Explain(js.Conn(), err); errors.As(err, new(*AccessError)) {
			if refused == nil {
				refused = fmt.Errorf("check %s: %w", what, err)
			}
		} else {
			problems = append(problems, fmt.Sprintf("%s: %v", what, err))
		}
	}
	for _, want := range t.Streams() {
		s, err := js.Stream(ctx, want.Name)
		if err != nil {
			missing("stream "+want.Name, err)
			continue
		}
		got := s.CachedInfo().Config
		if !slices.Equal(got.Subjects, want.Subjects) || got.Retention != want.Retention || got.Sealed || got.DenyDelete != want.DenyDelete {
			problems = append(problems, fmt.Sprintf("stream %s differs (subjects %v, retention %v, sealed %v; want subjects %v, retention %v)",
				want.Name, got.Subjects, got.Retention, got.Sealed, want.Subjects, want.Retention))
		}
	}
	for stream, want := range t.Consumers() {
		c, err := js.Consumer(ctx, stream, want.Durable)
		if err != nil {
			missing(fmt.Sprintf("consumer %s on %s", want.Durable, stream), err)
			continue
		}
		got := c.CachedInfo().Config
		if got.AckPolicy != want.AckPolicy || got.MaxDeliver != want.MaxDeliver || got.AckWait != want.AckWait || got.MaxAckPending != want.MaxAckPending {
			problems = append(problems, fmt.Sprintf("consumer %s on %s differs (ack wait %v, max deliver %d, max ack pending %d; want %v, %d, %d)",
				want.Durable, stream, got.AckWait, got.MaxDeliver, got.MaxAckPending, want.AckWait, want.MaxDeliver, want.MaxAckPending))
		}
	}
	for _, want := range t.Buckets() {
		if _, err := js.KeyValue(ctx, want.Bucket); err != nil {
			missing("key-value bucket "+want.Bucket, err)
		}
	}
	for _, want := range t.ObjectStores() {
		if _, err := js.ObjectStore(ctx, want.Bucket); err != nil {
			missing("object store "+want.Bucket, err)
		}
	}
	if refused != nil {
		return refused
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrNotProvisioned, strings.Join(problems, "; "))
	}
	return nil
}

// ErrNotProvisioned is Check's error: streams, consumers or buckets are missing or
// differ; `toolbus provision` (with administrator credentials) creates or fixes them.
var ErrNotProvisioned = errors.New("not provisioned (run `toolbus provision` with administrator credentials)")
