package localtools

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/messages"
)

type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

// A Go tool added under a server is called as an MCP server's tool is: by its exposed
// name, its qualified spellings, and its bare name when no other tool has it.
func TestRegistryServers(t *testing.T) {
	reg := New()
	add := func(_ context.Context, in addIn) (float64, error) { return in.A + in.B, nil }
	if err := AddFunc(reg.Server("calc"), messages.ToolInfo{Name: "add"}, add); err != nil {
		t.Fatal(err)
	}
	if err := AddFunc(reg.Server("calc"), messages.ToolInfo{Name: "mul"}, add); err != nil {
		t.Fatal(err)
	}
	if err := AddFunc(reg.Server("other"), messages.ToolInfo{Name: "mul"}, add); err != nil {
		t.Fatal(err)
	}
	reg.Add(Tool{Info: messages.ToolInfo{Name: "clock"}, Run: func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }})

	var names []string
	for _, info := range reg.Tools() {
		names = append(names, info.Name)
	}
	if want := []string{"calc__add", "calc__mul", "clock", "other__mul"}; !slices.Equal(names, want) {
		t.Errorf("Tools = %v, want %v", names, want)
	}
	if got := reg.Servers(); !slices.Equal(got, []string{"calc", "other"}) {
		t.Errorf("Servers = %v", got)
	}
	tests := []struct {
		name       string
		wantServer string
		wantTool   string
		wantErr    error
	}{
		{name: "calc__add", wantServer: "calc", wantTool: "add"},
		{name: "mcp__calc__add", wantServer: "calc", wantTool: "add"},
		{name: "calc::add", wantServer: "calc", wantTool: "add"},
		{name: "add", wantServer: "calc", wantTool: "add"},
		{name: "other::mul", wantServer: "other", wantTool: "mul"},
		{name: "clock", wantTool: "clock"},
		{name: "mul", wantErr: catalog.ErrAmbiguous},
		{name: "calc__clock", wantErr: catalog.ErrUnknownTool},
		{name: "nope", wantErr: catalog.ErrUnknownTool},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := reg.Resolve(tt.name)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Resolve = %+v, %v; want %v", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got.Server != tt.wantServer || got.Info.Name != tt.wantTool {
				t.Fatalf("Resolve = %q of %q, %v; want %q of %q", got.Info.Name, got.Server, err, tt.wantTool, tt.wantServer)
			}
		})
	}
	out, err := func() (json.RawMessage, error) {
		t, _ := reg.Resolve("mcp__calc__add")
		return t.Run(context.Background(), json.RawMessage(`{"a": 2, "b": 3}`))
	}()
	if err != nil || string(out) != "5" {
		t.Errorf("mcp__calc__add = %s, %v", out, err)
	}
}
