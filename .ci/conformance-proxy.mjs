// A loopback reverse proxy for the MCP conformance run. The conformance
// CLI's server mode has no way to send an Authorization header, and
// toolplane's /mcp requires an agent's key, so this proxy adds
// "Authorization: Bearer $CONFORMANCE_BEARER" to every request that has
// none and otherwise forwards requests byte for byte: method, path, every
// header (Host and Origin included, so Host/Origin validation is exercised
// on toolplane itself, not here) and streamed bodies both ways (SSE).
//
// Usage: CONFORMANCE_BEARER=key node conformance-proxy.mjs http://127.0.0.1:PORT
// It listens on 127.0.0.1 on a free port and prints "listening PORT".
import http from 'node:http';

const target = new URL(process.argv[2] ?? '');
const bearer = process.env.CONFORMANCE_BEARER ?? '';
if (!bearer) {
  console.error('conformance-proxy: CONFORMANCE_BEARER is not set');
  process.exit(2);
}

const agent = new http.Agent({ keepAlive: true });

const server = http.createServer((req, res) => {
  // rawHeaders keeps duplicates and the client's exact values.
  const headers = [];
  let hasAuth = false;
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i];
    const lower = name.toLowerCase();
    if (lower === 'connection' || lower === 'keep-alive') continue;
    if (lower === 'authorization') hasAuth = true;
    headers.push(name, req.rawHeaders[i + 1]);
  }
  if (!hasAuth) headers.push('Authorization', `Bearer ${bearer}`);

  const up = http.request({
    host: target.hostname,
    port: target.port,
    method: req.method,
    path: req.url,
    headers,
    agent,
    setHost: false,
  });
  up.on('response', (ur) => {
    const out = [];
    for (let i = 0; i < ur.rawHeaders.length; i += 2) {
      const lower = ur.rawHeaders[i].toLowerCase();
      if (lower === 'connection' || lower === 'keep-alive') continue;
      out.push(ur.rawHeaders[i], ur.rawHeaders[i + 1]);
    }
    res.writeHead(ur.statusCode ?? 502, ur.statusMessage, out);
    res.flushHeaders();
    ur.pipe(res);
    ur.on('error', () => res.destroy());
  });
  up.on('error', (err) => {
    if (!res.headersSent) {
      res.writeHead(502, { 'Content-Type': 'text/plain' });
      res.end(`conformance-proxy: ${err.message}\n`);
    } else {
      res.destroy();
    }
  });
  // A client that goes away (e.g. closes an SSE stream) ends the upstream request.
  res.on('close', () => up.destroy());
  req.pipe(up);
});

server.listen(0, '127.0.0.1', () => {
  console.log(`listening ${server.address().port}`);
});
for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => process.exit(0));
}
