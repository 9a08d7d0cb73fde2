// Reads UI message streams with the `ai` package's own reader, as useChat does:
// DefaultChatTransport (fetch, then parseJsonEventStream with uiMessageChunkSchema) feeding
// readUIMessageStream. Usage: node ai_sdk_read.mjs URL...; prints one JSON line per URL:
// {"ok": true, "chunks": N, "message": {...}} or {"ok": false, "error": "...", ...}.
import { DefaultChatTransport, readUIMessageStream } from 'ai';

const user = { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Weather in Paris?' }] };

async function read(url) {
  let chunks = 0;
  let message = null;
  try {
    const transport = new DefaultChatTransport({ api: url });
    const stream = await transport.sendMessages({
      chatId: 'chat_1',
      messages: [user],
      trigger: 'submit-message',
      messageId: undefined,
      abortSignal: undefined,
    });
    const counted = stream.pipeThrough(
      new TransformStream({
        transform(chunk, controller) {
          chunks += 1;
          controller.enqueue(chunk);
        },
      }),
    );
    for await (const snapshot of readUIMessageStream({ stream: counted, terminateOnError: true })) {
      message = snapshot;
    }
    return { ok: true, chunks, message };
  } catch (error) {
    const name = error?.name ?? 'Error';
    return { ok: false, error: `${name}: ${String(error?.message ?? error).slice(0, 500)}`, chunks, message };
  }
}

for (const url of process.argv.slice(2)) {
  console.log(JSON.stringify(await read(url)));
}
