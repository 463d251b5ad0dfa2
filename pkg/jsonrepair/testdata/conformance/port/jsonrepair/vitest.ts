import { tokens } from './index'
const out: any[] = []
let current = ''
const rec = (t: any, o: any) => { if (t && t.__token) out.push({ line: t.line, test: current, in: t.text, ...o }) }
export function describe(_: string, fn: () => void) { fn() }
describe.each = (arr: any[]) => (_: string, fn: (x: any) => void) => fn(arr[0])
export function test(name: string, fn: () => void) {
  current = name
  try { fn() } catch (e) { /* a test that uses the result further */ }
}
export function expect(v: any) {
  return {
    toBe: (y: any) => rec(v, { want: y }),
    toEqual: (y: any) => rec(v, { want: y }),
    toThrow: (e: any) => {
      const n = tokens.length
      const log = console.log; console.log = () => {}
      try { v() } finally { console.log = log }
      if (tokens.length > n) rec(tokens[tokens.length - 1], { error: e && e.message || String(e) })
    },
  }
}
process.on('exit', () => { for (const o of out) process.stdout.write(JSON.stringify(o) + '\n') })
