"""Reads mangiucugna/json_repair's test files and prints each case as a JSON line."""
import ast, json, sys, math

FILES = ["tests/test_json_repair.py", "tests/test_parse_array.py", "tests/test_parse_comment.py",
         "tests/test_parse_number.py", "tests/test_parse_object.py", "tests/test_parse_string.py"]
OK_KW = {"return_objects", "skip_json_loads", "ensure_ascii"}
skipped = {}

def lit(node):
    try:
        return True, ast.literal_eval(node)
    except Exception:
        return False, None

def finite(v):
    if isinstance(v, float):
        return math.isfinite(v)
    if isinstance(v, dict):
        return all(isinstance(k, str) and finite(x) for k, x in v.items())
    if isinstance(v, list):
        return all(finite(x) for x in v)
    return v is None or isinstance(v, (str, int, bool))

def case(path, fn, call, expected, objects):
    name = call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", "")
    kws = {}
    for k in call.keywords:
        ok, v = lit(k.value)
        if not ok or k.arg not in OK_KW:
            skipped[k.arg] = skipped.get(k.arg, 0) + 1
            return
        kws[k.arg] = v
    if not call.args:
        return
    ok, text = lit(call.args[0])
    okw, want = lit(expected)
    if not ok or not okw or not isinstance(text, str):
        skipped["nonliteral"] = skipped.get("nonliteral", 0) + 1
        return
    if name == "loads" or kws.get("return_objects") or objects:
        if not finite(want):
            skipped["nonfinite"] = skipped.get("nonfinite", 0) + 1
            return
        want = "" if want == "" else json.dumps(want, ensure_ascii=False)
    elif not isinstance(want, str):
        return
    print(json.dumps({"file": path, "line": call.lineno, "test": fn, "in": text, "want": want}, ensure_ascii=False))

for path in FILES:
    tree = ast.parse(open(path).read())
    for fn in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name.startswith("test")]:
        for n in ast.walk(fn):
            if isinstance(n, ast.Compare) and len(n.ops) == 1 and isinstance(n.ops[0], ast.Eq):
                l, r = n.left, n.comparators[0]
                for call, exp in ((l, r), (r, l)):
                    if isinstance(call, ast.Call) and getattr(call.func, "id", getattr(call.func, "attr", "")) in ("repair_json", "loads"):
                        case(path, fn.name, call, exp, False)
            elif isinstance(n, ast.Call) and getattr(n.func, "id", "") == "_assert_object_repairs" and len(n.args) == 2:
                fake = ast.Call(func=ast.Name(id="repair_json"), args=[n.args[0]], keywords=[])
                fake.lineno = n.lineno
                case(path, fn.name, fake, n.args[1], True)
print(json.dumps(skipped), file=sys.stderr)
