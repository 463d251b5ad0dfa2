package toolbus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/messages"
)

// The hosted APIs' streams of two calls, each event one chunk as the orchestrator
// forwards them: the first call has run (its result reached the orchestrator) before
// the last event is published, and the output — the native next turn with the API's ids
// included — is the one the whole response gets.
func TestHostedStreamRunsTheFirstCallEarly(t *testing.T) {
	t.Parallel()
	var j journal
	p := startMCPPipeline(t, mcpConfig(t, `{"engineering": {"enabled": false}}`), journalTools(t, &j))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, tt := range []struct {
		name, format string
		events       func(conv string) []string
		whole        func(conv string) string
		ids          []string
	}{
		{"openai", "openai", openAIEvents, openAIWhole, []string{"call_read", "call_write"}},
		{"anthropic", "anthropic", anthropicEvents, anthropicWhole, []string{"toolu_read", "toolu_write"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conv := "hosted-" + tt.name
			var mu sync.Mutex
			var progress []messages.ToolResult
			s, err := p.client.Stream(ctx, conv, &client.StreamOptions{
				SubmitOptions: client.SubmitOptions{Format: tt.format, OutputFormat: tt.format},
				Progress: func(r messages.ToolResult) {
					mu.Lock()
					defer mu.Unlock()
					progress = append(progress, r)
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			events := tt.events(conv)
			for _, e := range events[:len(events)-1] {
				if _, err := s.WriteString(e); err != nil {
					t.Fatal(err)
				}
			}
			mcpEventually(t, "the first call's result before the last event", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(progress) >= 1
			})
			mu.Lock()
			first := progress[0]
			mu.Unlock()
			if first.Tool != "slow_read" || !first.Success || first.ModelID != tt.ids[0] {
				t.Fatalf("first result before the end: %+v", first)
			}
			if _, err := s.WriteString(events[len(events)-1]); err != nil {
				t.Fatal(err)
			}
			streamed, err := s.Close(ctx)
			if err != nil {
				t.Fatal(err)
			}
			whole, err := p.client.Ask(ctx, conv+"-whole", tt.whole(conv+"-whole"), &client.SubmitOptions{OutputFormat: tt.format})
			if err != nil {
				t.Fatal(err)
			}
			for _, out := range []*messages.Output{streamed, whole} {
				if len(out.Results) != 2 || out.NativeFormat != tt.format {
					t.Fatalf("output: %+v", out)
				}
				for i, r := range out.Results {
					if r.CallID != tt.ids[i] || !r.Success {
						t.Errorf("result %d: %+v", i, r)
					}
				}
				for _, id := range tt.ids {
					if !strings.Contains(string(out.Native), `"`+id+`"`) {
						t.Errorf("native turn without %s: %s", id, out.Native)
					}
				}
			}
			// The same output but for the conversation named in the arguments.
			if got, want := strings.ReplaceAll(string(whole.Native), conv+"-whole", conv), string(streamed.Native); got != want {
				t.Errorf("streamed native turn\n%s\nwhole response's\n%s", want, got)
			}
			if got, want := strings.ReplaceAll(whole.Text, conv+"-whole", conv), streamed.Text; got != want {
				t.Errorf("streamed text\n%s\nwhole response's\n%s", want, got)
			}
			j.mu.Lock()
			defer j.mu.Unlock()
			if runs := j.runs[conv+"/after"]; runs != 1 {
				t.Errorf("the write ran %d times", runs)
			}
		})
	}
}

func args(conv, text string) string {
	b, _ := json.Marshal(map[string]string{"conv": conv, "text": text})
	return string(b)
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func openAIEvents(conv string) []string {
	read, write := args(conv, "first"), args(conv, "after")
	return []string{
		`{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_read","type":"function","function":{"name":"slow_read","arguments":""}}]},"finish_reason":null}]}`,
		fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":%s}}]},"finish_reason":null}]}`, jsonString(read)),
		`{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_write","type":"function","function":{"name":"note_write","arguments":""}}]},"finish_reason":null}]}`,
		fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":%s}}]},"finish_reason":null}]}`, jsonString(write)),
		`{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	}
}

func openAIWhole(conv string) string {
	return fmt.Sprintf(`{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[`+
		`{"id":"call_read","type":"function","function":{"name":"slow_read","arguments":%s}},`+
		`{"id":"call_write","type":"function","function":{"name":"note_write","arguments":%s}}]},"finish_reason":"tool_calls"}]}`,
		jsonString(args(conv, "first")), jsonString(args(conv, "after")))
}

func anthropicEvents(conv string) []string {
	read, write := args(conv, "first"), args(conv, "after")
	return []string{
		`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[]}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_read","name":"slow_read","input":{}}}`,
		fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":%s}}`, jsonString(read)),
		`{"type":"content_block_stop","index":0}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_write","name":"note_write","input":{}}}`,
		fmt.Sprintf(`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":%s}}`, jsonString(write)),
		`{"type":"content_block_stop","index":1}`,
		`{"type":"message_delta","delta":{"stop_reason":"tool_use"}}`,
		`{"type":"message_stop"}`,
	}
}

func anthropicWhole(conv string) string {
	return fmt.Sprintf(`{"id":"msg_1","type":"message","role":"assistant","content":[`+
		`{"type":"tool_use","id":"toolu_read","name":"slow_read","input":%s},`+
		`{"type":"tool_use","id":"toolu_write","name":"note_write","input":%s}],"stop_reason":"tool_use"}`,
		args(conv, "first"), args(conv, "after"))
}
