package localtools

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
)

// PythonSuffix marks a tool written as a Python module defining execute(params), the
// way lollms's local MCP binding writes them: NAME.py beside NAME.mcp.json, or both in a
// folder NAME/.
const PythonSuffix = ".py"

// pythonRunner imports the tool's module, calls execute with the arguments read from
// stdin, and prints its result as JSON. What the tool prints goes to stderr, so that
// stdout holds the result alone; an exception is the tool's error, its type and message
// on stderr, exit status 1.
const pythonRunner = `import importlib.util, json, os, sys
path = sys.argv[1]
out, sys.stdout = sys.stdout, sys.stderr
sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
spec = importlib.util.spec_from_file_location("toolbus_tool", path)
mod = importlib.util.module_from_spec(spec)
try:
    spec.loader.exec_module(mod)
    params = json.load(sys.stdin)
    result = mod.execute(params)
except Exception as e:
    print(f"{type(e).__name__}: {e}", file=sys.stderr)
    sys.exit(1)
json.dump(result, out, ensure_ascii=False, default=str)
`

// python is the interpreter that runs .py tools: python3 from PATH, resolved once to
// the interpreter itself (sys.executable), so that a version manager's shim does not
// need its own environment in the tool's allow-listed one.
var python = sync.OnceValues(func() (string, error) {
	p, err := exec.LookPath("python3")
	if err != nil {
		return "", errors.New("python3 is not installed (it runs .py tools)")
	}
	out, err := exec.Command(p, "-c", "import sys; print(sys.executable)").Output()
	if exe := strings.TrimSpace(string(out)); err == nil && exe != "" {
		return exe, nil
	}
	return p, nil
})

// pythonCommand is the program and arguments that run the .py tool at file.
func pythonCommand(file string) (string, []string, error) {
	interp, err := python()
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", file, err)
	}
	return interp, []string{"-c", pythonRunner, file}, nil
}
