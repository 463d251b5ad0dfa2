// ts-client.ts: an MCP client on the TypeScript SDK (npm @modelcontextprotocol/sdk),
// as Claude Desktop, Cursor or an agent framework would be, calling toolbus's MCP front
// door over streamable HTTP. It lists the tools, calls each of CALLS in turn and prints
// one JSON line: {"tools": [names], "results": [{"isError", "content", "structuredContent"}]}.
//
// Usage (Node 22 strips the types; the SDK is found through NODE_PATH, e.g.
// NODE_PATH=.cache/npm/node_modules after scripts/install-mcp-servers):
//
//   MCP_URL=http://127.0.0.1:8091/mcp MCP_TOKEN=… CALLS='[{"name": "transfer", "arguments": {"amount": 5}}]' node ts-client.ts
import { createRequire } from "node:module";

// The SDK's CommonJS build: require honours NODE_PATH, where an import would look
// beside this file.
const require = createRequire(import.meta.url);
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");

const url = new URL(process.env.MCP_URL ?? "http://127.0.0.1:8091/mcp");
const headers: Record<string, string> = {};
if (process.env.MCP_TOKEN) headers["Authorization"] = `Bearer ${process.env.MCP_TOKEN}`;
const calls: { name: string; arguments?: Record<string, unknown> }[] = JSON.parse(process.env.CALLS ?? "[]");

const client = new Client({ name: "ts-client", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers } }));
const listed = await client.listTools();
const results = [];
for (const call of calls) {
  const res = await client.callTool({ name: call.name, arguments: call.arguments ?? {} });
  results.push({ isError: res.isError ?? false, content: res.content, structuredContent: res.structuredContent });
}
console.log(JSON.stringify({ tools: listed.tools.map((t: { name: string }) => t.name), results }));
await client.close();
