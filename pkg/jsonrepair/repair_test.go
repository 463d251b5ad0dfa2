package jsonrepair

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// Cases the txtar corpus cannot hold well: bytes that are not UTF-8, limits.
func TestRepair(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string
		repairs Repairs
		wantErr error // nil: no error; else errors.Is target, or errSyntax for any
	}{
		{name: "valid unchanged", in: ` {"a" : [1,2]} `, want: ` {"a" : [1,2]} `},
		{name: "invalid utf8 in string", in: "{\"a\": \"x\xffy\"}", want: `{"a":"x` + "\uFFFD" + `y"}`, repairs: InvalidUTF8},
		{name: "invalid utf8 in key", in: "{a\xff: 1}", want: `{"a` + "\uFFFD" + `":1}`, repairs: UnquotedKeys | InvalidUTF8},
		{name: "nul byte in string", in: "{\"a\": \"x\x00y\"}", wantErr: errSyntax}, // binary, or a broken stream: both references refuse it
		{name: "tab in string", in: "{\"a\": \"x\ty\"}", want: `{"a":"x\ty"}`, repairs: ControlCharacter},
		{name: "bom", in: "\uFEFF{\"a\": 1}", want: `{"a":1}`, repairs: Whitespace},
		{name: "too deep valid", in: strings.Repeat("[", DefaultMaxDepth+1) + strings.Repeat("]", DefaultMaxDepth+1), wantErr: ErrTooDeep},
		{name: "too deep repair", in: strings.Repeat("[", DefaultMaxDepth+1), wantErr: ErrTooDeep},
		{name: "deep enough", in: strings.Repeat("[", DefaultMaxDepth) + strings.Repeat("]", DefaultMaxDepth), want: strings.Repeat("[", DefaultMaxDepth) + strings.Repeat("]", DefaultMaxDepth)},
		{name: "too large", in: `"` + strings.Repeat("x", DefaultMaxInputSize) + `"`, wantErr: ErrTooLarge},
		{name: "only whitespace", in: " \n\t ", wantErr: errSyntax},
		{name: "lone quote", in: `"`, want: `""`, repairs: UnclosedString | TruncatedValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, repairs, err := Repair(tt.in)
			if tt.wantErr != nil {
				var se *SyntaxError
				if !errors.As(err, &se) || tt.wantErr != errSyntax && !errors.Is(err, tt.wantErr) {
					t.Fatalf("Repair() error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Repair() error = %v", err)
			}
			if string(out) != tt.want || !slices.Equal(repairs, tt.repairs.Names()) {
				t.Errorf("Repair() = %s %v, want %s %v", out, repairs, tt.want, tt.repairs)
			}
			if !json.Valid(out) {
				t.Errorf("output is not valid JSON")
			}
		})
	}
}

// errSyntax stands for any *SyntaxError in a table.
var errSyntax = errors.New("any syntax error")

func TestRepairArguments(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string
		repairs Repairs
		wantErr bool
	}{
		{name: "object", in: `{"p": 10}`, want: `{"p": 10}`},
		{name: "repaired object", in: `{p: 10}`, want: `{"p":10}`, repairs: UnquotedKeys},
		{name: "string holding object", in: `"{\"p\": 10}"`, want: `{"p": 10}`, repairs: StringArguments},
		{name: "string holding sloppy object", in: `"{p=10}"`, want: `{"p":10}`, repairs: UnquotedKeys | EqualsAsColon | StringArguments},
		{name: "blank", in: "  ", want: `{}`},
		{name: "null", in: `null`, want: `{}`},
		{name: "spaces around", in: " {\"a\": 1}\n", want: `{"a": 1}`},
		{name: "array", in: `[1, 2]`, wantErr: true},
		{name: "number", in: `42`, wantErr: true},
		{name: "string holding text", in: `"hello"`, wantErr: true},
		{name: "garbage", in: `{{{`, wantErr: true},
		{name: "concatenated objects", in: "{\"a\": 1}\n{\"b\": 2}", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, repairs, err := RepairArguments(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("RepairArguments() error = %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil && (string(out) != tt.want || !slices.Equal(repairs, tt.repairs.Names())) {
				t.Errorf("RepairArguments() = %s %v, want %s %v", out, repairs, tt.want, tt.repairs)
			}
		})
	}
}

// timeAfter bounds a test that must run in linear time: generous for a slow, loaded
// machine, far below what a quadratic pass over the inputs would take.
func timeAfter(t *testing.T) <-chan time.Time {
	t.Helper()
	return time.After(10 * time.Second)
}

// TestRepairLinear feeds inputs that make naive repairers quadratic; each must finish in
// a time that only a linear pass can meet.
func TestRepairLinear(t *testing.T) {
	const n = 200_000
	tests := []struct {
		name string
		in   string
	}{
		{name: "many quotes", in: `{"a": "` + strings.Repeat(`x" `, n/3) + `"}`},
		{name: "unclosed comments", in: `{"a": 1, ` + strings.Repeat("/*", n/2)},
		{name: "many commas", in: "[" + strings.Repeat(",", n)},
		{name: "mismatched brackets", in: strings.Repeat("[{", DefaultMaxDepth/2-1) + strings.Repeat("}]", n/2)},
		{name: "unclosed strings", in: strings.Repeat(`{"a": "`, n/7)},
		{name: "many keys", in: "{" + strings.Repeat("a: b, ", n/6)},
		{name: "unquoted words", in: "[" + strings.Repeat("word ", n/5)},
		{name: "leading prose", in: strings.Repeat("text ", n/5) + "{}"},
		{name: "quotes after commas", in: "[" + strings.Repeat(`"a, `, n/4)},
		{name: "commas in unquoted values", in: `{"a": ` + strings.Repeat("x, ", n/3)},
		{name: "doubled quotes", in: `{"a": ` + strings.Repeat(`""x`, n/3)},
		{name: "keys with colons", in: "{" + strings.Repeat(`"a:b, `, n/6)},
		{name: "brackets in a string", in: `["` + strings.Repeat(`[x"] `, n/6)},
		{name: "words after quotes", in: `["a"` + strings.Repeat(` b"`, n/3)},
		{name: "set", in: "{" + strings.Repeat("'a', ", n/5) + "}"},
		{name: "fences in prose", in: strings.Repeat("text ```json\n[1]\n``` ", n/20)},
		{name: "regular expressions", in: "[" + strings.Repeat("/a/, ", n/5)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _, _ = Repair(tt.in)
			}()
			select {
			case <-done:
			case <-timeAfter(t):
				t.Fatal("Repair took too long: not linear")
			}
		})
	}
}
