package formatter

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/toolbus/toolbus/internal/bus"
	"github.com/toolbus/toolbus/pkg/messages"
)

// memGatherer gathers in memory, as the bucket does across replicas.
type memGatherer struct {
	mu   sync.Mutex
	m    map[string]*gathered
	fail error
}

func (s *memGatherer) Add(_ context.Context, r messages.ToolResult) ([]messages.ToolResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	if s.m == nil {
		s.m = map[string]*gathered{}
	}
	g := s.m[r.ResponseID]
	if g == nil {
		g = &gathered{}
		s.m[r.ResponseID] = g
	}
	g.add(r)
	return slices.Clone(g.Results), nil
}

func result(id string, index, count int, tool string) messages.ToolResult {
	return messages.ToolResult{CallID: messages.CallID(id, index), ResponseID: id, Conversation: "c1", Index: index, Count: count,
		Tool: tool, Success: true, Result: json.RawMessage(`{"i":` + string(rune('0'+index)) + `}`)}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		name string
		in   []messages.ToolResult
		// wantOutputs[i]: the tools of the output the i-th result produces, "" for none.
		wantOutputs []string
		fail        error
		wantErr     string
	}{
		{name: "one call is answered at once", in: []messages.ToolResult{result("r1", 0, 1, "a")}, wantOutputs: []string{"a"}},
		{name: "three calls out of order", in: []messages.ToolResult{result("r2", 2, 3, "c"), result("r2", 0, 3, "a"), result("r2", 1, 3, "b")},
			wantOutputs: []string{"", "", "a,b,c"}},
		{name: "a redelivered result counts once", in: []messages.ToolResult{result("r3", 0, 2, "a"), result("r3", 0, 2, "a"), result("r3", 1, 2, "b")},
			wantOutputs: []string{"", "", "a,b"}},
		{name: "a result redelivered after the output gives it again", in: []messages.ToolResult{result("r4", 0, 2, "a"), result("r4", 1, 2, "b"), result("r4", 1, 2, "b")},
			wantOutputs: []string{"", "a,b", "a,b"}},
		{name: "gatherer failure is retried", in: []messages.ToolResult{result("r5", 0, 2, "a")}, fail: errors.New("bucket away"), wantErr: "retry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Stage{Gather: &memGatherer{fail: tt.fail}}
			for i, r := range tt.in {
				out, err := s.Format(context.Background(), r, &bus.Delivery{Delivered: 1})
				if tt.wantErr != "" {
					var retry *bus.RetryError
					if !errors.As(err, &retry) {
						t.Fatalf("err = %v, want a retry", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if tt.wantOutputs[i] == "" {
					if len(out) != 0 {
						t.Fatalf("result %d: %d outputs before the response is complete", i, len(out))
					}
					continue
				}
				if len(out) != 1 {
					t.Fatalf("result %d: %d outputs, want 1", i, len(out))
				}
				o := out[0]
				if o.Subject != messages.OutputSubject("c1") || o.Meta.MsgID != r.ResponseID {
					t.Errorf("output to %s with id %q", o.Subject, o.Meta.MsgID)
				}
				var got messages.Output
				if err := json.Unmarshal(o.Body, &got); err != nil {
					t.Fatal(err)
				}
				var tools []string
				for _, res := range got.Results {
					tools = append(tools, res.Tool)
				}
				if strings.Join(tools, ",") != tt.wantOutputs[i] || strings.Count(got.Text, "<tool_result>") != len(tools) {
					t.Errorf("output tools %v, want %s; text:\n%s", tools, tt.wantOutputs[i], got.Text)
				}
			}
		})
	}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		wantErr bool
	}{
		{"result", `{"call_id":"r/0","response_id":"r","conversation":"c","index":0,"count":1,"tool":"a","success":true,"result":1}`, false},
		{"no response id", `{"count":1,"tool":"a"}`, true},
		{"no count", `{"response_id":"r","tool":"a"}`, true},
		{"not json", `<tool_result>`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(&bus.Delivery{Data: []byte(tt.body)})
			if (err != nil) != tt.wantErr {
				t.Errorf("err = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}

// However large a response's results, its output fits: the results are cut to
// previews saying so.
func TestFormatFitsTheLimit(t *testing.T) {
	big := strings.Repeat("é", 300_000) // 600 KB of JSON string
	var out []bus.Outgoing
	s := &Stage{Gather: &memGatherer{}, MaxOutputBytes: 256 << 10}
	for i := range 3 {
		r := result("big", i, 3, "report")
		r.Result = json.RawMessage(`"` + big + `"`)
		var err error
		if out, err = s.Format(context.Background(), r, &bus.Delivery{Delivered: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if len(out) != 1 || len(out[0].Body) > 256<<10 {
		t.Fatalf("%d outputs, the last %d bytes; want one within %d", len(out), len(out[len(out)-1].Body), 256<<10)
	}
	var o messages.Output
	if err := json.Unmarshal(out[0].Body, &o); err != nil {
		t.Fatal(err)
	}
	for i, r := range o.Results {
		var capped struct {
			Truncated bool   `json:"truncated"`
			Size      int    `json:"size"`
			Preview   string `json:"preview"`
		}
		if err := json.Unmarshal(r.Result, &capped); err != nil || !capped.Truncated || capped.Size != len(big)+2 || !utf8.ValidString(capped.Preview) {
			t.Errorf("result %d: %+v, %v", i, capped.Truncated, err)
		}
	}
}
