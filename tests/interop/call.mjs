// Calls a source's tools through the official TypeScript MCP client, as MCP hosts do, and prints
// what the client handed back: one JSON line per call, {"result": ...} or {"error": "..."}.
//
//   node call.mjs stdio PYTHON -m sources.orders < calls.json
//   node call.mjs http http://127.0.0.1:8102/mcp < calls.json
//
// calls.json: [{"name": "search_orders", "arguments": {...}, "meta": {...}}, ...]. The tools are
// listed first, as hosts list them: that is what makes the client validate each result's
// structured content against the tool's output schema.
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [kind, target, ...args] = process.argv.slice(2);
const calls = JSON.parse(readFileSync(0, "utf8"));
const transport =
  kind === "stdio"
    ? new StdioClientTransport({ command: target, args, env: process.env, stderr: "ignore" })
    : new StreamableHTTPClientTransport(new URL(target));
const client = new Client({ name: "interop-test", version: "1.0.0" });
await client.connect(transport);
const { tools } = await client.listTools();
process.stdout.write(JSON.stringify({ tools: tools.map((tool) => tool.name) }) + "\n");
for (const call of calls) {
  try {
    const result = await client.callTool(
      { name: call.name, arguments: call.arguments, _meta: call.meta },
      undefined,
      { timeout: 15000 },
    );
    process.stdout.write(JSON.stringify({ result }) + "\n");
  } catch (error) {
    process.stdout.write(JSON.stringify({ error: String(error?.message ?? error) }) + "\n");
  }
}
await client.close();
