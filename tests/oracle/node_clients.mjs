// The oracle's JavaScript clients: the `ai` package's own chat reader (DefaultChatTransport,
// parseJsonEventStream with uiMessageChunkSchema, readUIMessageStream, as useChat reads) and
// @ag-ui/client's HttpAgent (SSE parse, schema, verifyEvents, apply), each fed a body's bytes
// by a stand-in `fetch`. The packages are those of tests/node (npm ci --prefix tests/node).
// Usage: node node_clients.mjs < cases.json, where cases.json is [{"id", "protocol": "ai_sdk_ui"
// | "ag_ui", "path"}]; prints one JSON line per case: {"id", "ok": true} or {"id", "ok": false,
// "error": "..."}.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const packages = createRequire(join(dirname(fileURLToPath(import.meta.url)), '..', 'node', 'package.json'));
const { DefaultChatTransport, readUIMessageStream } = await import(pathToFileURL(packages.resolve('ai')).href);
const { HttpAgent } = await import(pathToFileURL(packages.resolve('@ag-ui/client')).href);

process.env.SUPPRESS_TRANSFORMATION_WARNINGS = 'true';
let body = new Uint8Array();
globalThis.fetch = async () =>
  new Response(body, { status: 200, headers: { 'content-type': 'text/event-stream' } });

const user = { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Weather in Paris?' }] };

async function readAiSdk() {
  const transport = new DefaultChatTransport({ api: 'http://oracle.invalid/api/chat' });
  const stream = await transport.sendMessages({
    chatId: 'chat_1', messages: [user], trigger: 'submit-message', messageId: undefined, abortSignal: undefined,
  });
  for await (const _ of readUIMessageStream({ stream, terminateOnError: true })) { /* snapshots */ }
}

async function runAgUi() {
  const agent = new HttpAgent({ url: 'http://oracle.invalid/agent', threadId: 'thread_1', initialState: { count: 0 } });
  const errors = [];
  await agent.runAgent({ runId: 'run_1' }, { onRunFailed: ({ error }) => { errors.push(String(error?.message ?? error)); } });
  if (errors.length) throw new Error(errors[0]);
}

const cases = JSON.parse(readFileSync(0, 'utf8'));
for (const { id, protocol, path } of cases) {
  body = readFileSync(path);
  try {
    await (protocol === 'ag_ui' ? runAgUi() : readAiSdk());
    console.log(JSON.stringify({ id, ok: true }));
  } catch (error) {
    const name = error?.name ?? 'Error';
    console.log(JSON.stringify({ id, ok: false, error: `${name}: ${String(error?.message ?? error).slice(0, 300)}` }));
  }
}
