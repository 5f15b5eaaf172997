// A client of the MCP TypeScript SDK for the tasks tests: it opens a
// session, lists the tools (which is how the SDK learns that a tool may
// run as a task), and makes one call with the SDK's tasks API, printing
// one JSON line of what it saw.
//
// Arguments: URL, bearer key, tool name, arguments (JSON), mode:
//   stream  call the tool with callToolStream (a task, since the server and
//           the tool say so), polled to its end: the task created, each
//           status read, and the result (or the error the stream ended on);
//   cancel  call the tool as a task, cancel the task once created, and read
//           it again.
// Either way it then lists the tasks (tasks/list) by their ids.
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');

const [url, key, name, args, mode] = process.argv.slice(2);

async function main() {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: 'Bearer ' + key } },
  });
  const client = new Client({ name: 'ts-agent', version: '1' });
  await client.connect(transport);
  await client.listTools();
  const out = { isTask: client.isToolTask(name), statuses: [] };
  const stream = client.experimental.tasks.callToolStream({ name, arguments: JSON.parse(args || '{}') });
  for await (const m of stream) {
    if (m.type === 'taskCreated') {
      out.taskId = m.task.taskId;
      out.created = m.task.status;
      if (mode === 'cancel') {
        const c = await client.experimental.tasks.cancelTask(out.taskId);
        out.cancelled = c.status;
        const again = await client.experimental.tasks.getTask(out.taskId);
        out.after = again.status;
        break;
      }
    } else if (m.type === 'taskStatus') {
      out.statuses.push(m.task.status);
    } else if (m.type === 'result') {
      const r = m.result;
      out.isError = !!r.isError;
      out.text = (r.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('');
      out.meta = r._meta || {};
      out.structured = r.structuredContent || null;
    } else if (m.type === 'error') {
      out.error = String(m.error && m.error.message);
    }
  }
  out.listed = (await client.experimental.tasks.listTasks()).tasks.map((t) => t.taskId);
  process.stdout.write(JSON.stringify(out) + '\n');
  await transport.terminateSession();
  await client.close();
}

main().catch((err) => {
  process.stderr.write(String((err && err.stack) || err) + '\n');
  process.exit(1);
});
