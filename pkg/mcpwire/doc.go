// Package mcpwire connects toolbus to remote MCP servers. It owns their configuration,
// in the "mcpServers" JSON format that Claude Desktop, Claude Code and Cursor use, and
// (as it grows) their sessions, reconnects, catalog and name spacing. The protocol itself
// comes from github.com/modelcontextprotocol/go-sdk.
//
// A configuration entry:
//
//	"mcpServers": {
//	  "everything": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"]},
//	  "tickets":    {"type": "http", "url": "https://tickets.example/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}
//	}
package mcpwire
