// An MCP client built on the TypeScript SDK's OAuth client provider,
// driven by the browser tests: node sdkclient.mjs SDK_DIR SERVER_URL [SCOPE].
// It prints each authorization URL alone on a line and takes the code at
// its own loopback callback. Commands arrive on stdin, one a line:
// "list", "call NAME JSON_ARGUMENTS", "token" (the access token held) or
// "forget" (drop the tokens, keep the registration); each is answered with a line
// "OK <json>" or "ERR <message>". A command refused for authorization
// waits for the person to authorize again and is retried once.
import http from 'node:http';
import readline from 'node:readline';
import { pathToFileURL } from 'node:url';

const [sdkDir, serverURL, scope] = process.argv.slice(2);
const load = (p) => import(pathToFileURL(`${sdkDir}/dist/esm/${p}`).href);
const { Client } = await load('client/index.js');
const { StreamableHTTPClientTransport } = await load('client/streamableHttp.js');
const { UnauthorizedError } = await load('client/auth.js');

// The loopback callback: each code wakes whoever waits for one.
let codeWaiter = null;
const codes = [];
const callback = http.createServer((req, res) => {
  const u = new URL(req.url, 'http://127.0.0.1');
  const code = u.searchParams.get('code');
  res.writeHead(code ? 200 : 400, { 'Content-Type': 'text/plain' });
  res.end(code ? 'Signed in; you can close this window.' : 'no code: ' + (u.searchParams.get('error') ?? ''));
  if (!code) return;
  if (codeWaiter) { const w = codeWaiter; codeWaiter = null; w(code); } else codes.push(code);
});
await new Promise((resolve) => callback.listen(0, '127.0.0.1', resolve));
const redirectUrl = `http://127.0.0.1:${callback.address().port}/callback`;
const nextCode = () => codes.length ? Promise.resolve(codes.shift()) : new Promise((resolve) => { codeWaiter = resolve; });

// The provider keeps everything in memory, as a desktop client would on disk.
const kept = {};
const provider = {
  get redirectUrl() { return redirectUrl; },
  get clientMetadata() {
    return { client_name: 'toolplane sdk e2e', redirect_uris: [redirectUrl], grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'], token_endpoint_auth_method: 'none', ...(scope ? { scope } : {}) };
  },
  clientInformation: () => kept.client,
  saveClientInformation: (c) => { kept.client = c; },
  tokens: () => kept.tokens,
  saveTokens: (t) => { kept.tokens = t; },
  redirectToAuthorization: (u) => { process.stdout.write(`${u.toString()}\n`); },
  saveCodeVerifier: (v) => { kept.verifier = v; },
  codeVerifier: () => kept.verifier,
  invalidateCredentials: (what) => {
    if (what === 'all' || what === 'tokens') delete kept.tokens;
    if (what === 'all' || what === 'client') delete kept.client;
  },
};

const connect = () => {
  transport = new StreamableHTTPClientTransport(new URL(serverURL), { authProvider: provider });
  client = new Client({ name: 'toolplane-sdk-e2e', version: '1' });
  return client.connect(transport);
};
let transport, client;

// withAuth runs fn, and when the server wants an authorization, waits for
// the person's code, finishes it and runs fn once more.
async function withAuth(fn) {
  try {
    return await fn();
  } catch (e) {
    if (!(e instanceof UnauthorizedError)) throw e;
    process.stdout.write('AUTHORIZING\n');
    await transport.finishAuth(await nextCode());
    return await fn();
  }
}

try {
  // A transport that met the 401 while starting is finished and replaced,
  // as the SDK's own example client does.
  try {
    await connect();
  } catch (e) {
    if (!(e instanceof UnauthorizedError)) throw e;
    process.stdout.write('AUTHORIZING\n');
    await transport.finishAuth(await nextCode());
    await connect();
  }
} catch (e) {
  process.stdout.write(`ERR connect: ${e.message}\n`);
  process.exit(1);
}
process.stdout.write('CONNECTED\n');

for await (const line of readline.createInterface({ input: process.stdin })) {
  const [cmd, name, ...rest] = line.split(' ');
  try {
    let out;
    if (cmd === 'list') out = await withAuth(() => client.listTools());
    else if (cmd === 'call') out = await withAuth(() => client.callTool({ name, arguments: JSON.parse(rest.join(' ') || '{}') }));
    else if (cmd === 'token') out = kept.tokens?.access_token;
    else if (cmd === 'forget') out = delete kept.tokens;
    else throw new Error(`unknown command ${cmd}`);
    process.stdout.write(`OK ${JSON.stringify(out)}\n`);
  } catch (e) {
    process.stdout.write(`ERR ${e.message}\n`);
  }
}
callback.close();
process.exit(0);
