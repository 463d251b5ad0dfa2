package messages

import (
	"encoding/json"
	"reflect"
	"testing"
)

// sameJSON reports whether a and b are valid JSON that decode to the same value.
func sameJSON(t *testing.T, what string, fast, std []byte) {
	t.Helper()
	if !json.Valid(fast) {
		t.Fatalf("%s: invalid JSON %q", what, fast)
	}
	var a, b any
	if err := json.Unmarshal(fast, &a); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if err := json.Unmarshal(std, &b); err != nil {
		t.Fatalf("%s: encoding/json wrote what it cannot read: %v", what, err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("%s:\n fast %s\n std  %s", what, fast, std)
	}
}

// FuzzEncode: for every message json.Unmarshal accepts, AppendCall, AppendResult and
// AppendOutput write JSON that reads back as what json.Marshal writes.
func FuzzEncode(f *testing.F) {
	seedMessages(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var c ToolCall
		if json.Unmarshal(data, &c) == nil {
			if std, err := json.Marshal(c); err == nil {
				sameJSON(t, "call", AppendCall(nil, &c), std)
			}
		}
		var r ToolResult
		if json.Unmarshal(data, &r) == nil {
			if std, err := json.Marshal(r); err == nil {
				sameJSON(t, "result", AppendResult(nil, &r), std)
			}
		}
		var o Output
		if json.Unmarshal(data, &o) == nil {
			if std, err := json.Marshal(o); err == nil {
				sameJSON(t, "output", AppendOutput(nil, &o), std)
			}
		}
	})
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", "q\"b\\s", "\n\r\t\x00\x1f", "ü€😀", "\xff\xfe", "a\u2028b\u2029", "<&>"} {
		got := appendString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q → %s: %v", s, got, err)
		}
		std, _ := json.Marshal(s)
		var want string
		json.Unmarshal(std, &want)
		if back != want {
			t.Errorf("%q → %s reads back %q, want %q", s, got, back, want)
		}
	}
}

func BenchmarkEncodeResult(b *testing.B) {
	r := ToolResult{CallID: "r1/0", ResponseID: "r1", Conversation: "bench", Count: 1, Tool: "execute_tool", Success: true,
		Backend: "engineering", Attempts: 1, DurationMS: 0.05,
		Result: json.RawMessage(`{"tool":"geometry.solve_circle_area","formula":"A = π·r²","solved_for":"A","value":3.14159,"unit":"m²","inputs":{"r":{"value":1,"unit":"m"}},"notes":["units: A [m²]"]}`)}
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf = AppendResult(buf[:0], &r)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
