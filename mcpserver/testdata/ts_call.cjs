// A client of the MCP TypeScript SDK for the approval round-trip tests: it
// opens a session, lists the tools (so the SDK knows their output schemas
// and validates results against them, as it does for any application),
// makes one tools/call and prints one JSON line with what it was answered.
// A result the SDK refuses ends the process with its error on stderr.
//
// Arguments: URL, bearer key, tool name, arguments (JSON), _meta (JSON).
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');

const [url, key, name, args, meta] = process.argv.slice(2);

async function main() {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: 'Bearer ' + key } },
  });
  const client = new Client({ name: 'ts-agent', version: '1' });
  await client.connect(transport);
  await client.listTools();
  const params = { name, arguments: JSON.parse(args || '{}') };
  if (meta) params._meta = JSON.parse(meta);
  const r = await client.callTool(params);
  const text = (r.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('');
  process.stdout.write(JSON.stringify({ isError: !!r.isError, text, meta: r._meta || {}, structured: r.structuredContent || null }) + '\n');
  await transport.terminateSession();
  await client.close();
}

main().catch((err) => {
  process.stderr.write(String((err && err.stack) || err) + '\n');
  process.exit(1);
});
