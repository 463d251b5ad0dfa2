// Package executor is the stage that runs tool calls. Every replica pulls from one shared
// durable consumer on the calls stream; [Executor.Execute] routes a call to its backend
// (local tools, the engineering suite, later MCP servers) and turns whatever happens
// into a [messages.ToolResult]; [Service] is the plumbing that feeds it and publishes
// the result with Nats-Msg-Id = call id.
//
// Engineering sessions live in the sessions key-value bucket ([KVSessions]), so a domain
// activated through one replica is active on all of them.
package executor
