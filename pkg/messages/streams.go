package messages

import "strings"

// JetStream stream, consumer and key-value bucket names. Orchestrators that read outputs
// with a consumer of their own bind to StreamOutput.
const (
	StreamResponses = "TOOLBUS_RESPONSES"
	// StreamChunks holds the chunks of streamed responses until the parser read them.
	StreamChunks  = "TOOLBUS_STREAM"
	StreamCalls   = "TOOLBUS_CALLS"
	StreamResults = "TOOLBUS_RESULTS"
	StreamOutput  = "TOOLBUS_OUTPUT"
	StreamDead    = "TOOLBUS_DEAD"
	// StreamAdvisories keeps JetStream's advisories about toolbus messages that ran out
	// of deliveries or were terminated, so none is missed while no executor runs.
	StreamAdvisories = "TOOLBUS_ADVISORIES"

	// One shared durable consumer per stage; a stage's replicas all pull from it.
	ConsumerParser    = "parser"
	ConsumerExecutor  = "executor"
	ConsumerFormatter = "formatter"
	// ConsumerDeadLetter answers and moves aside what ran out of deliveries.
	ConsumerDeadLetter = "deadletter"

	// BucketSessions: conversation → engineering session (active domains).
	BucketSessions = "toolbus_sessions"
	// BucketOwners: (server, conversation) → the executor replica that holds the
	// conversation's session with a conversation-scoped MCP server (pkg/affinity).
	BucketOwners = "toolbus_owners"
	// BucketCalls: call id → claim and stored result.
	BucketCalls = "toolbus_calls"
	// BucketHealth: server name → last [HealthStatus], and [HealthLeaderKey].
	BucketHealth = "toolbus_health"
	// HealthLeaderKey holds the lease of the healthd replica that probes; no server's
	// key contains a dot, so it never collides with one.
	HealthLeaderKey = "healthd.leader"
	// BucketCatalog: server name → its tools.
	BucketCatalog = "toolbus_catalog"
	// BucketAuth: server name → its OAuth grant (token, refresh token, client), sealed
	// with the operator's token key; see pkg/tokens.
	BucketAuth = "toolbus_auth"
	// BucketGather: response id → the results gathered so far by the formatter.
	BucketGather = "toolbus_gather"
	// BucketLimits: limit and counted tenant, conversation, server or tool → the calls
	// counted in its current window (pkg/policy Limiter).
	BucketLimits = "toolbus_limits"
	// BucketApprovals: approval id → an [Approval], a call waiting for a person's
	// decision and what was decided (pkg/policy Approvals).
	BucketApprovals = "toolbus_approvals"
	// BucketResults is an object store: call id → a whole result too large to travel
	// inline ([StoredResult]). Kept as long as outputs are.
	BucketResults = "toolbus_results"
)

// OutputStream is the stream that keeps a tenant's outputs and progress: StreamOutput
// for the default tenant (""), TOOLBUS_OUTPUT_<tenant> for a configured tenant, so that
// a tenant's orchestrator may read its own stream whole and nobody else's.
func OutputStream(tenant string) string {
	if tenant == "" {
		return StreamOutput
	}
	return StreamOutput + "_" + tenant
}

// ResultsBucket is the object store that keeps a tenant's stored results: BucketResults
// for the default tenant (""), toolbus_results_<tenant> for a configured tenant.
func ResultsBucket(tenant string) string {
	if tenant == "" {
		return BucketResults
	}
	return BucketResults + "_" + tenant
}

// ResponseStream and ChunkStream are the work queues of a tenant's responses, whole and
// chunk by chunk: StreamResponses and StreamChunks for the default tenant (""),
// <name>_<tenant> for a configured tenant. JetStream de-duplicates a stream's messages
// by Nats-Msg-Id whatever their subject: in a stream of its own, no tenant can take
// another's response id first.
func ResponseStream(tenant string) string { return tenantStream(StreamResponses, tenant) }

// ChunkStream: see [ResponseStream].
func ChunkStream(tenant string) string { return tenantStream(StreamChunks, tenant) }

func tenantStream(name, tenant string) string {
	if tenant == "" {
		return name
	}
	return name + "_" + tenant
}

// IsResponseStream reports whether stream is a tenant's ResponseStream.
func IsResponseStream(stream string) bool { return isTenantStream(stream, StreamResponses) }

// IsChunkStream reports whether stream is a tenant's ChunkStream.
func IsChunkStream(stream string) bool { return isTenantStream(stream, StreamChunks) }

func isTenantStream(stream, name string) bool {
	return stream == name || strings.HasPrefix(stream, name+"_")
}

// AdvisorySubjects are JetStream's advisories about the pipeline's consumers that the
// dead-letter handler acts on: those of the default tenant's queues and of each of
// tenants' response and chunk queues.
func AdvisorySubjects(tenants ...string) []string {
	var subjects []string
	queues := [][2]string{
		{StreamResponses, ConsumerParser}, {StreamChunks, ConsumerParser}, {StreamCalls, ConsumerExecutor}, {StreamResults, ConsumerFormatter},
	}
	for _, t := range tenants {
		queues = append(queues, [2]string{ResponseStream(t), ConsumerParser}, [2]string{ChunkStream(t), ConsumerParser})
	}
	for _, sc := range queues {
		subjects = append(subjects,
			"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES."+sc[0]+"."+sc[1],
			"$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED."+sc[0]+"."+sc[1])
	}
	return subjects
}
