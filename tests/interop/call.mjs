// Calls a source's tools through the official TypeScript MCP client, as MCP hosts do, and prints
// what the client handed back: one JSON line per call, {"result": ...} or {"error": "..."}.
//
//   node call.mjs stdio PYTHON -m sources.orders < calls.json
//   node call.mjs http http://127.0.0.1:8102/mcp < calls.json
//   node call.mjs list stdio PYTHON -m sources.orders
//
// `list` reads no calls: it prints one line, {"tools": [...]}, every tool as the client's
// `listTools()` handed it back (name, title, annotations, schemas), and exits.
//
// Over HTTP, INTEROP_BEARER_TOKEN (when set) is sent as `Authorization: Bearer ...` on every request,
// the way a host that was given a token sends it (`requestInit.headers`). A connection the server
// refuses (401) prints one line, {"refused": {status, message, wwwAuthenticate, error,
// resourceMetadataUrl, metadata}}: what the client parsed from WWW-Authenticate, and the protected
// resource metadata it then discovers, as a host does before it asks for a token.
//
// calls.json: [{"name": "search_orders", "arguments": {...}, "meta": {...}}, ...]. The tools are
// listed first, as hosts list them: that is what makes the client validate each result's
// structured content against the tool's output schema.
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  discoverOAuthProtectedResourceMetadata,
  extractWWWAuthenticateParams,
} from "@modelcontextprotocol/sdk/client/auth.js";

const listOnly = process.argv[2] === "list";
const [kind, target, ...args] = process.argv.slice(listOnly ? 3 : 2);
const calls = listOnly ? [] : JSON.parse(readFileSync(0, "utf8"));
const bearer = process.env.INTEROP_BEARER_TOKEN;
let refusal = null; // the last 401 or 403 the server answered, as the client's fetch saw it
async function watchingFetch(url, init) {
  const response = await fetch(url, init);
  if (response.status === 401 || response.status === 403) {
    refusal = {
      status: response.status,
      wwwAuthenticate: response.headers.get("www-authenticate"),
      ...extractWWWAuthenticateParams(response),
    };
  }
  return response;
}
const transport =
  kind === "stdio"
    ? new StdioClientTransport({ command: target, args, env: process.env, stderr: "ignore" })
    : new StreamableHTTPClientTransport(new URL(target), {
        fetch: watchingFetch,
        requestInit: bearer ? { headers: { Authorization: `Bearer ${bearer}` } } : undefined,
      });
const client = new Client({ name: "interop-test", version: "1.0.0" });
try {
  await client.connect(transport);
} catch (error) {
  if (refusal === null) throw error;
  const metadataUrl = refusal.resourceMetadataUrl;
  const metadata = await discoverOAuthProtectedResourceMetadata(new URL(target), {
    resourceMetadataUrl: metadataUrl,
  });
  const refused = {
    ...refusal,
    resourceMetadataUrl: metadataUrl?.href,
    message: String(error?.message ?? error),
    code: error?.code,
    metadata,
  };
  process.stdout.write(JSON.stringify({ refused }) + "\n");
  process.exit(0);
}
const { tools } = await client.listTools();
process.stdout.write(JSON.stringify({ tools: listOnly ? tools : tools.map((tool) => tool.name) }) + "\n");
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
