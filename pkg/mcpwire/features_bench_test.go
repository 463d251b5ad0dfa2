package mcpwire_test

import (
	"encoding/json"
	"testing"

	"github.com/toolbus/toolbus/pkg/mcpwire"
)

// What a feature tool and a task cost beside a plain tools/call, in process (go-sdk
// server on in-memory transports; the tasker for tasks, whose task is done at its
// second poll: the floor of a task is two poll intervals, 50 ms each at the least).
func BenchmarkFeatureCall(b *testing.B) {
	p := newPool(b, map[string]mcpwire.ServerConfig{"lib": placeholder}, &mcpwire.Options{Dial: inMemory(library())})
	tp := newPool(b, map[string]mcpwire.ServerConfig{"tasker": placeholder}, &mcpwire.Options{Dial: newTasker().dial})
	ctx := ctxT(b)
	for _, bc := range []struct {
		name string
		pool *mcpwire.Pool
		tool string
		args string
	}{
		{"tools/call", p, "lib__find", `{}`},
		{"resources/read", p, "lib__resources_read", `{"uri":"lib://books/dune"}`},
		{"prompts/get", p, "lib__prompts_get", `{"name":"review","arguments":{"title":"Dune"}}`},
		{"tools/call without a task", tp, "tasker__plain", `{}`},
		{"optional task answered at once", tp, "tasker__maybe", `{}`},
	} {
		tool, err := bc.pool.Lookup(ctx, bc.tool)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.pool.CallTool(ctx, tool, json.RawMessage(bc.args)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
