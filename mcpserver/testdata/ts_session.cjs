// A client of the MCP TypeScript SDK that holds one session and takes its
// requests one JSON line at a time on stdin, printing one JSON line per
// answer: {"list":true} lists the tools, {"call":NAME,"arguments":{...},
// "meta":{...}} makes a tools/call, {"end":true} ends the session. The
// test between two lines does what a person would (approve a call). A
// result the SDK refuses is printed as {"error":...}; a failure to
// connect ends the process with its error on stderr.
//
// Arguments: URL, bearer key.
const readline = require('readline');
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');

const [url, key] = process.argv.slice(2);

async function answer(client, cmd) {
  if (cmd.list) {
    const r = await client.listTools();
    return {
      tools: r.tools.map((t) => ({ name: t.name, readOnly: !!(t.annotations && t.annotations.readOnlyHint) })),
    };
  }
  const params = { name: cmd.call, arguments: cmd.arguments || {} };
  if (cmd.meta) params._meta = cmd.meta;
  const r = await client.callTool(params);
  const text = (r.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('');
  return { isError: !!r.isError, text, meta: r._meta || {}, structured: r.structuredContent || null };
}

async function main() {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: 'Bearer ' + key } },
  });
  const client = new Client({ name: 'ts-agent', version: '1' });
  await client.connect(transport);
  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    const cmd = JSON.parse(line);
    if (cmd.end) break;
    let out;
    try {
      out = await answer(client, cmd);
    } catch (err) {
      out = { error: String((err && err.message) || err) };
    }
    process.stdout.write(JSON.stringify(out) + '\n');
  }
  await transport.terminateSession();
  await client.close();
}

main().catch((err) => {
  process.stderr.write(String((err && err.stack) || err) + '\n');
  process.exit(1);
});
