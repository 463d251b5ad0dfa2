// Package executor is the stage that runs tool calls. Every replica pulls from one shared
// durable consumer on the calls stream; [Stage.Execute] is the stage function: one list
// of named steps (path, path.go) that resolve a call once with [Router.Resolve] into a
// [Route] — the backend, the tool's description and the call itself —, admit it (the
// policy, approvals, limits), take it to the replica holding its conversation's session,
// claim it (pkg/claims), run it with retries ([Executor.ExecuteRoute]) and return the
// [messages.ToolResult] for the runner to publish with message id = call id. Each step
// goes on, answers the call or hands it back.
//
// Backends implement [Backend]; this package has two, one file each: local tools
// ([LocalBackend], local.go) and the MCP servers of a pool ([MCPBackend], mcp.go). Others
// plug in from outside: the engineering calculators (pkg/engineering/backend) and a
// program's own (toolbus.Options.Backends). Every failure of every backend is turned
// into the error a model reads, and whether it is retried, by one function, [Classify]
// (classify.go). The circuit breaker over backends is [Breaker] (gate.go).
package executor
