package messages

// JetStream stream, consumer and key-value bucket names. Orchestrators that read outputs
// with a consumer of their own bind to StreamOutput.
const (
	StreamResponses = "TOOLBUS_RESPONSES"
	StreamCalls     = "TOOLBUS_CALLS"
	StreamResults   = "TOOLBUS_RESULTS"
	StreamOutput    = "TOOLBUS_OUTPUT"
	StreamDead      = "TOOLBUS_DEAD"

	// One shared durable consumer per stage; a stage's replicas all pull from it.
	ConsumerParser    = "parser"
	ConsumerExecutor  = "executor"
	ConsumerFormatter = "formatter"

	// BucketSessions: conversation → engineering session (active domains).
	BucketSessions = "toolbus_sessions"
	// BucketCalls: call id → claim and stored result.
	BucketCalls = "toolbus_calls"
	// BucketHealth: server name → last [HealthStatus].
	BucketHealth = "toolbus_health"
	// BucketCatalog: server name → its tools.
	BucketCatalog = "toolbus_catalog"
	// BucketGather: response id → the results gathered so far by the formatter.
	BucketGather = "toolbus_gather"
)
