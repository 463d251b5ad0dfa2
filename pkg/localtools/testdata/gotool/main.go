// Command gotool is a tools-folder tool for the tests: what it does depends on the
// "action" argument.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

func main() {
	var args struct {
		Action string `json:"action"`
		N      int    `json:"n"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&args); err != nil {
		fmt.Fprintln(os.Stderr, "cannot read the arguments:", err)
		os.Exit(2)
	}
	out := json.NewEncoder(os.Stdout)
	switch args.Action {
	case "echo":
		out.Encode(map[string]any{"action": args.Action, "n": args.N})
	case "env":
		out.Encode(map[string]any{"env": os.Environ()})
	case "fail":
		for i := range 20 {
			fmt.Fprintf(os.Stderr, "log line %d\n", i)
		}
		fmt.Fprintln(os.Stderr, "error: the widget is broken")
		os.Exit(3)
	case "sleep":
		if f := os.Getenv("PIDFILE"); f != "" {
			os.WriteFile(f, []byte(fmt.Sprintln(os.Getpid())), 0o644)
		}
		time.Sleep(time.Hour)
	case "garbage":
		fmt.Println("{this is not json")
	case "two":
		fmt.Println(`{"a": 1} {"b": 2}`)
	case "big":
		fmt.Print(`"` + strings.Repeat("x", args.N) + `"`)
	case "bad_output":
		out.Encode(map[string]any{"count": "not a number"})
	}
}
