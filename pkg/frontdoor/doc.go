// Package frontdoor is toolbus as an MCP server: any MCP client (a desktop app, an
// agent framework, the MCP Inspector) lists toolbus's tools and calls them through the
// pipeline, so exactly-once, ordering, limits, policy, approvals, stored results and
// dead letters apply to its calls as to an orchestrator's.
//
// A [Door] is an orchestrator inside toolbus. It follows the catalog bucket and offers
// each tenant's MCP clients the tools the policy does not deny them outright
// (tools/list, with notifications/tools/list_changed when the catalog changes). A
// tools/call becomes a response of exactly one structured call (an Anthropic tool_use
// block holding the client's arguments as they came) published with [client.Client]
// under a response id made from the MCP session's id and the JSON-RPC request's id, in
// the conversation of the MCP session; the output becomes the tools/call result
// ([Result]). A client's retry of a request (same session, same id) is the same
// response: JetStream drops the second publish and the first output answers it, so the
// tool runs once. While the call waits for a person's approval, a client that gave a
// progress token is told so in a progress notification.
//
// The backends' prompts and resources are the door's too, each under its own name where
// one server alone offers it, else "<server>__<name>" (prompts/list, prompts/get,
// resources/list, resources/templates/list and resources/read run their servers' feature
// tools through the pipeline; a resource comes back as the server gave it), as are
// their completions (completion/complete, through a server's completion tool) and
// subscriptions (resources/subscribe, through its subscribe tool, the updates relayed
// back), and a backend's
// sampling and elicitation requests during a call are relayed to the calling client when
// it declared the capability.
//
// The door holds no rule of its own: what may run, and how, is the pipeline's. Nor does
// it hold state another replica needs: a request of a session another replica issued is
// served here under the same id (its retried tools/call is the same response).
//
// # Transports
//
// [Door.Handler] serves MCP's streamable HTTP; [Door.Serve] serves one connection
// (stdio for `toolbus mcp`, in-memory in tests). Both pass the JSON-RPC id of each
// tools/call to the handler in its _meta ("toolbus/request-id", set by the door; a
// client's own value is replaced), because the go-sdk does not hand it to tool handlers.
// Handler's streams keep their events in the replica's memory (the go-sdk's event
// store): a client whose stream broke resumes it there with Last-Event-ID.
//
// # Example
//
//	door, err := frontdoor.New(nc, &frontdoor.Options{Offers: toolbus.ToolOffers(cfg)})
//	...
//	go door.Run(ctx) // follows the catalog
//	http.Handle("/mcp", door.Handler(&frontdoor.HTTPOptions{Tokens: cfg.MCPTokens()}))
//
// The package's Example runs it whole, with toolbus on an embedded NATS.
package frontdoor
