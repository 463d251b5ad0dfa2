// Package executor is the stage that runs tool calls. Every replica pulls from one shared
// durable consumer on the calls stream; [Stage.Execute] is the stage function: it claims
// a call (pkg/claims), resolves it once with [Router.Resolve] into a [Route] — the
// backend, the tool's description and the call itself — runs it with retries
// ([Executor.ExecuteRoute]) and returns the [messages.ToolResult] for the runner to
// publish with message id = call id.
//
// Backends, one file each: local tools ([LocalBackend], local.go), the engineering suite
// ([EngineeringBackend], engineering.go, with the session stores that make an
// activation visible to every replica: [KVSessions] and [CachedSessions]) and the MCP
// servers of a pool ([MCPBackend], mcp.go). The circuit breaker over backends is
// [Breaker] (gate.go).
package executor
