// The differential oracle: npm's jsonrepair answers every JSON line {"in": TEXT} on
// stdin with {"out": REPAIRED} or {"error": MESSAGE} on stdout, line by line.
const { jsonrepair } = require('jsonrepair')
const lines = require('fs').readFileSync(0, 'utf8').split('\n').filter(Boolean)
for (const l of lines) {
  const c = JSON.parse(l)
  let o
  try {
    o = { out: jsonrepair(c.in) }
  } catch (e) {
    o = { error: e.message.replace(/ at position \d+$/, '') }
  }
  process.stdout.write(JSON.stringify(o) + '\n')
}
