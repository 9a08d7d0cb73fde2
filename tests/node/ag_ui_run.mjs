// Runs AG-UI agents with @ag-ui/client's HttpAgent, as a frontend does: POST the
// RunAgentInput, then the client's own pipeline (SSE parse, schema, chunk expansion,
// verifyEvents, apply). Usage: node ag_ui_run.mjs URL...; prints one JSON line per URL:
// {"ok": true, "messages": [...], "state": {...}} or {"ok": false, "error": "...", ...}.
import { HttpAgent } from '@ag-ui/client';

process.env.SUPPRESS_TRANSFORMATION_WARNINGS = 'true';

async function run(url) {
  const agent = new HttpAgent({ url, threadId: 'thread_1', initialState: { count: 0 } });
  const errors = [];
  try {
    await agent.runAgent(
      { runId: 'run_1' },
      { onRunFailed: ({ error }) => { errors.push(String(error?.message ?? error)); } },
    );
    if (errors.length) return { ok: false, error: errors[0].slice(0, 500), messages: agent.messages, state: agent.state };
    return { ok: true, messages: agent.messages, state: agent.state };
  } catch (error) {
    return { ok: false, error: String(error?.message ?? error).slice(0, 500), messages: agent.messages, state: agent.state };
  }
}

for (const url of process.argv.slice(2)) {
  console.log(JSON.stringify(await run(url)));
}
