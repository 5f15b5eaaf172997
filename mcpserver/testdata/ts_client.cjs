// A client of the MCP TypeScript SDK for TestTypeScriptClientContinuesOnAnotherNode:
// it opens a session on node A, calls ledger_post, says "opened" and waits
// for a line on stdin (the test stops A meanwhile), then sends every
// request to node B: the same call again, another call, and a DELETE.
// It prints one JSON line with what it was answered.
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const readline = require('node:readline');

const [urlA, urlB, key] = process.argv.slice(2);
let target = new URL(urlA);

async function main() {
  const via = (url, init) => {
    const u = new URL(url);
    u.host = target.host;
    return fetch(u, init);
  };
  const transport = new StreamableHTTPClientTransport(new URL(urlA), {
    requestInit: { headers: { Authorization: 'Bearer ' + key } },
    fetch: via,
  });
  const client = new Client({ name: 'ts-agent', version: '1' });
  await client.connect(transport);
  const text = (r) => r.content[0].text;
  const first = text(await client.callTool({ name: 'ledger_post', arguments: { amount: 1 } }));
  process.stdout.write('opened ' + transport.sessionId + '\n');
  const rl = readline.createInterface({ input: process.stdin });
  await new Promise((resolve) => rl.once('line', resolve));
  rl.close();
  target = new URL(urlB);
  const again = text(await client.callTool({ name: 'ledger_post', arguments: { amount: 1 } }));
  const second = text(await client.callTool({ name: 'ledger_post', arguments: { amount: 2 } }));
  const session = transport.sessionId;
  await transport.terminateSession();
  process.stdout.write(JSON.stringify({ first, again, second, session }) + '\n');
  await client.close();
}

main().catch((err) => {
  process.stderr.write(String(err && err.stack || err) + '\n');
  process.exit(1);
});
