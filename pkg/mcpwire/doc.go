// Package mcpwire connects toolbus to remote MCP servers. It owns their configuration,
// in the "mcpServers" JSON format that Claude Desktop, Claude Code and Cursor use, their
// sessions and reconnects, and the catalog of their tools (the names and the lookup are
// pkg/catalog's; the vendors' function declarations of these tools are pkg/dialect's).
// The protocol itself comes from github.com/modelcontextprotocol/go-sdk, but for
// tools/call on a streamable HTTP session, which toolbus sends and reads itself (see
// directCalls in direct.go: the SDK allocates 128 KiB to read one call's answer).
//
// # Configuration
//
// A [ServerConfig] is one entry of "mcpServers":
//
//	"mcpServers": {
//	  "everything": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"]},
//	  "tickets":    {"type": "http", "url": "https://tickets.example/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
//	  "legacy":     {"type": "jsonrpc", "url": "http://legacy.internal/rpc", "timeout": "10s", "blockedTools": ["delete_*"]}
//	}
//
// "stdio" servers are child processes (command, args, env, cwd); "http" is streamable
// HTTP, "sse" the older HTTP+SSE transport, and "jsonrpc" plain JSON-RPC 2.0 over POST
// (tools/list and tools/call, one request per POST) for services that predate MCP.
//
// # Sessions
//
// A [Pool] holds one session per enabled server. Nothing starts until the pool is first
// used; then every server is connected in parallel. A session that breaks (a stdio server
// that exits, an HTTP server that restarts and forgets the session, a network failure)
// is reopened with exponential backoff; a call that finds the session gone waits for the
// next attempt and asks for it at once. A request that provably never reached the tool
// is sent once more after reconnecting; one that may have reached it fails with
// [ErrConnectionLost], and the caller decides from [Tool.Retryable]. [Pool.Close] stops
// every child process and waits for it. [Pool.Update] applies a changed configuration
// while running, leaving the servers that did not change (and their calls) alone, and
// [Pool.Status] reports each server's session for health checks.
//
// # Catalog and names
//
// The pool's [catalog.Catalog] ([Pool.Catalog]) is built from each server's own
// tools/list, refreshed on connect, on notifications/tools/list_changed and every
// [ServerConfig.Refresh]. A tool is exposed as "<server>__<tool>" (see
// [catalog.ExposedName]); a bare tool name works when exactly one server has it,
// "mcp__<server>__<tool>" and "<server>::<tool>" are aliases, and a route in
// [Options.Routes] wins over all of them ([catalog.Catalog.Resolve]). prefix and enabled
// are applied per server, and so are allowedTools and blockedTools, beside the top-level
// lists ([Options.AllowedTools], [Options.BlockedTools]), through [catalog.Permit] (see
// [ServerConfig.Lists]).
//
// # Resources, prompts and tasks
//
// A server's resources and prompts are offered as tools of the pool's making, beside the
// server's own: "<server>__resources_list", "<server>__resources_read",
// "<server>__prompts_list" and "<server>__prompts_get" for a server that declares the
// capability (their remote names, "resources:read" and so on, are no MCP tool's; see
// features.go and [ServerConfig.Resources]). A tool that requires or allows MCP tasks
// (SEP-1686) runs as one: tools/call with a task, tasks/get within the call's time,
// tasks/result, tasks/cancel when the call's context ends (tasks.go), on the call's own
// session (raw.go: requests the go-sdk does not send).
//
// # Results, and what a server asks and reports during a call
//
// A result's images, audio and embedded blobs are named in the value the model reads
// ("[image: image/png, 19 KB, content 1]") and handed to the caller as
// messages.Content through [WithKeptContent] (result.go). A server's own requests during
// a call go to whoever made it (the conversation of [WithConversation]), by the one rule
// of server.caller: elicitation under [ServerConfig.Elicitation] "ask" through
// [Options.Ask], sampling under [ServerConfig.Sampling] "ask" through [Options.Sample];
// what it reports and logs of a call made [WithCall] reaches [Options.Progress] and
// [Options.Log] with the call's id.
package mcpwire
