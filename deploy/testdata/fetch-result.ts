// fetch-result.ts: a tenant's orchestrator written in TypeScript on nats.js, as a
// deployment's own code would be. It connects under the tenant's user (whose replies may
// only come under its private inbox prefix) and either
//
//   - fetches a stored result from the tenant's object store bucket and prints its size
//     and sha256 (the Size and SHA256 of the output's messages.StoredResult), or
//   - reads the output of a response from the tenant's output stream with an ordered
//     consumer of its own and prints it.
//
// Usage (Node 22 strips the types; nats.js is found through NODE_PATH, e.g.
// NODE_PATH=.cache/npm/node_modules after scripts/install-mcp-servers):
//
//   node fetch-result.ts object BUCKET NAME
//   node fetch-result.ts output STREAM SUBJECT RESPONSE_ID
//
// Environment: NATS_URL (nats://127.0.0.1:4222), NATS_USER, NATS_PASSWORD,
// NATS_INBOX_PREFIX (_INBOX.<user>, what deploy/nats.conf lets the user subscribe to),
// NATSJS (classic: the `nats` 2.x package; modular: @nats-io/transport-node,
// @nats-io/jetstream and @nats-io/obj 3.x), NATS_TIMEOUT_MS (each request's time limit,
// 5000) and NATS_DEADLINE_MS (the whole run's, 6 times that).
//
// It prints one JSON line on stdout and exits 0, or an error on stderr and exits 1
// (2 past the deadline). Every asynchronous error the server sends, a permissions
// violation above all, goes to stderr as it comes.
import { createHash } from "node:crypto";
import { createRequire } from "node:module";

// The npm packages are CommonJS: require honours NODE_PATH, where an import would look
// only in node_modules folders above this file.
const require = createRequire(import.meta.url);

type Mode = "object" | "output";

// What the script needs of either generation of nats.js.
interface NatsJS {
  connect(): Promise<Conn>;
  objectStore(nc: Conn, bucket: string): Promise<ObjectStore>;
  orderedConsumer(nc: Conn, stream: string, subject: string): Promise<Consumer>;
}

interface Conn {
  status(): AsyncIterable<Record<string, unknown>>;
  close(): Promise<void>;
}

interface ObjectStore {
  get(name: string): Promise<ObjectResult | null>;
}

interface ObjectResult {
  info: { name: string; size: number; digest: string };
  data: ReadableStream<Uint8Array>;
  error: Promise<Error | null>;
}

interface Consumer {
  next(opts: { expires: number }): Promise<JsMsg | null>;
}

interface JsMsg {
  subject: string;
  seq: number;
  info: { pending: number };
  json<T>(): T;
}

interface Output {
  response_id: string;
  conversation: string;
  kind: string;
  results?: { tool: string; success: boolean; stored?: { bucket: string; name: string; size: number; sha256: string } }[];
}

function env(name: string, fallback?: string): string {
  const v = process.env[name] ?? fallback;
  if (v === undefined || v === "") {
    throw new Error(`$${name} is not set`);
  }
  return v;
}

const user = env("NATS_USER");
const timeout = Number(env("NATS_TIMEOUT_MS", "5000"));
const connectOptions = {
  servers: env("NATS_URL", "nats://127.0.0.1:4222").split(","),
  user,
  pass: env("NATS_PASSWORD"),
  inboxPrefix: env("NATS_INBOX_PREFIX", `_INBOX.${user}`),
  name: `toolbus fetch-result.ts ${user}`,
  timeout,
};

function classic(): NatsJS {
  const nats: typeof import("nats") = require("nats");
  const js = (nc: Conn) => (nc as unknown as import("nats").NatsConnection).jetstream({ timeout });
  return {
    connect: async () => (await nats.connect(connectOptions)) as unknown as Conn,
    objectStore: async (nc, bucket) => (await js(nc).views.os(bucket)) as unknown as ObjectStore,
    orderedConsumer: async (nc, stream, subject) =>
      (await js(nc).consumers.get(stream, { filterSubjects: [subject] })) as unknown as Consumer,
  };
}

function modular(): NatsJS {
  const transport: typeof import("@nats-io/transport-node") = require("@nats-io/transport-node");
  const jetstream: typeof import("@nats-io/jetstream") = require("@nats-io/jetstream");
  const obj: typeof import("@nats-io/obj") = require("@nats-io/obj");
  const js = (nc: Conn) => jetstream.jetstream(nc as unknown as import("@nats-io/transport-node").NatsConnection, { timeout });
  return {
    connect: async () => (await transport.connect(connectOptions)) as unknown as Conn,
    // open, unlike create, never makes the bucket: an orchestrator provisions nothing.
    objectStore: async (nc, bucket) => (await new obj.Objm(js(nc)).open(bucket)) as unknown as ObjectStore,
    orderedConsumer: async (nc, stream, subject) =>
      (await js(nc).consumers.get(stream, { filter_subjects: [subject] })) as unknown as Consumer,
  };
}

// fetchObject reads the object whole and checks it against the store's own digest.
async function fetchObject(lib: NatsJS, nc: Conn, bucket: string, name: string) {
  const os = await lib.objectStore(nc, bucket);
  const r = await os.get(name);
  if (r === null) {
    throw new Error(`${bucket}/${name}: no such object`);
  }
  const hash = createHash("sha256");
  let size = 0;
  for await (const chunk of r.data as unknown as AsyncIterable<Uint8Array>) {
    hash.update(chunk);
    size += chunk.length;
  }
  const err = await r.error;
  if (err) {
    throw err;
  }
  return { bucket, name: r.info.name, size, sha256: hash.digest("hex"), info_size: r.info.size, digest: r.info.digest };
}

// readOutput reads the subject's outputs from the stream's start until the response's.
async function readOutput(lib: NatsJS, nc: Conn, stream: string, subject: string, responseID: string) {
  const c = await lib.orderedConsumer(nc, stream, subject);
  for (;;) {
    const m = await c.next({ expires: timeout });
    if (m === null) {
      throw new Error(`${stream}: no output of response ${responseID} on ${subject}`);
    }
    const out = m.json<Output>();
    if (out.response_id === responseID) {
      return { stream, subject: m.subject, seq: m.seq, output: out };
    }
    if (m.info.pending === 0) {
      throw new Error(`${stream}: no output of response ${responseID} on ${subject}`);
    }
  }
}

// describe turns a status event into a line: nats.js 2 carries a permission error's
// subject in permissionContext, nats.js 3 in the error's message.
function describe(s: Record<string, unknown>): string {
  const parts: string[] = [String(s.type)];
  for (const key of ["data", "error", "permissionContext"]) {
    const v = s[key];
    if (v instanceof Error) {
      parts.push(v.message);
    } else if (v !== undefined) {
      parts.push(typeof v === "string" ? v : JSON.stringify(v));
    }
  }
  return parts.join(" ");
}

async function main(argv: string[]): Promise<void> {
  const [mode, ...args] = argv as [Mode, ...string[]];
  const want = mode === "object" ? 2 : mode === "output" ? 3 : -1;
  if (want < 0 || args.length !== want) {
    throw new Error("usage: fetch-result.ts object BUCKET NAME | output STREAM SUBJECT RESPONSE_ID");
  }
  const which = env("NATSJS", "classic");
  const lib = which === "modular" ? modular() : which === "classic" ? classic() : null;
  if (lib === null) {
    throw new Error(`$NATSJS: ${which}, want classic or modular`);
  }
  const nc = await lib.connect();
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === "error" || String(s.type).includes("permission")) {
        console.error(`nats: ${describe(s)}`);
      }
    }
  })();
  try {
    const res =
      mode === "object"
        ? await fetchObject(lib, nc, args[0], args[1])
        : await readOutput(lib, nc, args[0], args[1], args[2]);
    console.log(JSON.stringify({ natsjs: which, user, ...res }));
  } finally {
    await nc.close();
  }
}

const deadline = Number(env("NATS_DEADLINE_MS", String(6 * timeout)));
const timer = setTimeout(() => {
  console.error(`fetch-result.ts: timeout: nothing after ${deadline}ms`);
  process.exit(2);
}, deadline);

main(process.argv.slice(2)).then(
  () => clearTimeout(timer),
  (err: unknown) => {
    const e = err as { message?: string; code?: string; name?: string };
    console.error(`fetch-result.ts: ${e?.name ?? "Error"}: ${e?.message ?? String(err)}${e?.code ? ` (${e.code})` : ""}`);
    process.exit(1);
  },
);
