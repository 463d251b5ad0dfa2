// validate.mjs: validates an AsyncAPI document with the official parser
// (@asyncapi/parser, found through NODE_PATH) and prints its diagnostics, one JSON object
// a line: {"severity": "error"|"warning"|"info"|"hint", "code", "message", "path"}. It
// exits 1 when any is an error, or the document could not be read.
//
//   NODE_PATH=.cache/npm/node_modules node validate.mjs docs/asyncapi.yaml
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { resolve } from "node:path";

// The package is CommonJS: require honours NODE_PATH, where an import would not.
const require = createRequire(import.meta.url);
const { Parser } = require("@asyncapi/parser");

const severities = ["error", "warning", "info", "hint"];
const file = resolve(process.argv[2]);
const { document, diagnostics } = await new Parser().parse(readFileSync(file, "utf8"), { source: file });
let errors = 0;
for (const d of diagnostics) {
  const severity = severities[d.severity] ?? String(d.severity);
  if (severity === "error") {
    errors++;
  }
  console.log(JSON.stringify({ severity, code: d.code, message: d.message, path: d.path.join(".") }));
}
if (errors > 0 || document === undefined) {
  console.error(`${file}: ${errors} errors${document === undefined ? ", no document" : ""}`);
  process.exit(1);
}
console.error(`${file}: valid AsyncAPI ${document.version()}, ${document.channels().length} channels, ${document.allMessages().length} messages`);
