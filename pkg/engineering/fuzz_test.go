package engineering_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/toolbus/toolbus/pkg/engineering"
	"github.com/toolbus/toolbus/pkg/messages"
)

// FuzzCall feeds arbitrary argument bytes to every tool. Call must not panic and must
// answer with either a JSON object or a *messages.ToolError that is not internal (an
// internal error here means a recovered panic). Seeds are in testdata/fuzz/FuzzCall.
func FuzzCall(f *testing.F) {
	tools := []string{"clock", "dispatch_engineering", "execute_tool", "pressure.solve_kesselformel", "materials.lookup", "nope"}
	for _, c := range engineering.DefaultCalculators() {
		tools = append(tools, c.Name)
	}
	hier := engineering.New(nil)
	flat := engineering.New(&engineering.Options{Expose: engineering.ExposeFlat})
	ctx := context.Background()
	for _, d := range hier.Domains() {
		if _, err := hier.Call(ctx, "fuzz", "dispatch_engineering", json.RawMessage(`{"action":"activate","domain":"`+d+`"}`)); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, tool uint8, args []byte) {
		name := tools[int(tool)%len(tools)]
		for _, s := range []*engineering.Suite{hier, flat} {
			out, err := s.Call(ctx, "fuzz", name, args)
			if err != nil {
				var te *messages.ToolError
				if !errors.As(err, &te) {
					t.Fatalf("%s %q: error %v is not a *messages.ToolError", name, args, err)
				}
				if te.Code == messages.CodeInternal {
					t.Fatalf("%s %q: internal error: %v (%v)", name, args, te, te.Err)
				}
				continue
			}
			var obj map[string]any
			if err := json.Unmarshal(out, &obj); err != nil {
				t.Fatalf("%s %q: result %q is not a JSON object: %v", name, args, out, err)
			}
		}
	})
}
