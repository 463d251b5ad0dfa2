"""For every input on stdin (JSON lines with "in"), json_repair's output, as JSON lines."""
import json, sys
sys.path.insert(0, ".")
from json_repair import repair_json
for line in sys.stdin:
    c = json.loads(line)
    try:
        out = repair_json(c["in"])
    except Exception as e:
        out = None
    print(json.dumps(out, ensure_ascii=False))
