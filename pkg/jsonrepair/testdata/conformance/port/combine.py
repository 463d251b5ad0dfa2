"""Joins the ported cases with both references' outputs into cases.jsonl (stdout)."""
import json, sys
js_rev, py_rev = sys.argv[1], sys.argv[2]
cases = [json.loads(l) for l in open("all.jsonl")]
py = [json.loads(l) for l in open("py_out.jsonl")]
js = [json.loads(l) for l in open("js_out.jsonl")]
seen = set()
for c, p, j in zip(cases, py, js):
    if "file" in c:
        suite, src = "json_repair", "mangiucugna/json_repair@%s %s:%d" % (py_rev, c["file"], c["line"])
    else:
        suite, src = "jsonrepair", "josdejong/jsonrepair@%s src/index.test.ts:%d" % (js_rev, c["line"])
    if (suite, c["in"]) in seen:
        continue
    seen.add((suite, c["in"]))
    o = {"suite": suite, "src": src, "in": c["in"]}
    if "error" in c:
        o["want_error"] = c["error"]
    else:
        o["want"] = c["want"]
    if "error" in j:
        o["jsonrepair_error"] = j["error"]
    else:
        o["jsonrepair"] = j["out"]
    o["json_repair"] = p
    print(json.dumps(o, ensure_ascii=False))
