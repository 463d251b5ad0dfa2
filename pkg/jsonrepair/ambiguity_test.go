package jsonrepair

import (
	"errors"
	"testing"
)

// TestRepairArgumentsAmbiguous: where a lost closer leaves two readings that both
// parse, RepairArguments answers ErrAmbiguous; a single slip, or closers missing only at
// the end of a cut, is still repaired.
func TestRepairArgumentsAmbiguous(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // "" with wantErr
		wantErr  bool
	}{
		{name: "end quote lost, then a comma", in: `{"a": "x, "b": 2 "c": 3}`, wantErr: true},
		{name: "inner brace lost and a comma dropped", in: `{"a": {"b": 1, "c": 2 "d": 3}`, wantErr: true},
		// A text that may be cut right after its last brace reads as the cut.
		{name: "inner brace lost, or a cut", in: `{"a": {"b": 1, "c": 2, "d": 3}`, want: `{"a":{"b":1,"c":2,"d":3}}`},
		{name: "inner brace lost with one member: one reading", in: `{"a": {"b": 1}`, want: `{"a":{"b":1}}`},
		{name: "final brace lost, prose after", in: `{"query": 1` + "\nI will now run it.", wantErr: true},
		{name: "final brace lost, prose taken for a value", in: `{"city": "Paris" which is fine`, wantErr: true},
		{name: "string holds the closers, prose after", in: `{"a": "x} Let me know`, wantErr: true},
		{name: "end quote lost, next key's quote doubled", in: `{"path": "3.14,""limit": 940}`, wantErr: true},
		{name: "array closer lost before a key", in: `{"a": [1, 2, "b": [3]}`, wantErr: true},
		{name: "two quotes lost", in: `{limit": [[522, "10:30, 140]]}`, wantErr: true},
		{name: "a quote inside and a comma dropped", in: `{"a": "x</i>],["y"] "b": 1}`, wantErr: true},

		{name: "cut after a complete value", in: `{"a": 1, "b": {"c": 2}`, want: `{"a":1,"b":{"c":2}}`},
		{name: "cut after a value and a comma", in: `{"a": [1, 2], "b": "x",`, want: `{"a":[1,2],"b":"x"}`},
		{name: "a dropped comma alone", in: `{"a": 1 "b": 2}`, want: `{"a":1,"b":2}`},
		{name: "a dropped colon and the final brace", in: `{"a" 1, "b": 2`, want: `{"a":1,"b":2}`},
		{name: "an end quote lost before a comma", in: `{"a": "x, "b": 2}`, want: `{"a":"x","b":2}`},
		{name: "an opening key quote lost", in: `{a": 1, "b": 2}`, want: `{"a":1,"b":2}`},
		{name: "a doubled quote", in: `{"a": ""x", "b": 2}`, want: `{"a":"x","b":2}`},
		{name: "an unquoted value, cut after the next", in: `{"unit": mm, "x": 1`, want: `{"unit":"mm","x":1}`},
		{name: "prose after a value, the final brace lost", in: `{"unit": "mm" see above`, wantErr: true},
		{name: "a value holding escaped quotes without its opening quote, cut", in: `{"a": He said "stop" twice", "b": 1`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := RepairArguments(tt.in)
			if tt.wantErr {
				var se *SyntaxError
				if !errors.Is(err, ErrAmbiguous) || !errors.As(err, &se) || se.Line == 0 {
					t.Fatalf("RepairArguments(%q) = %s, %v; want ErrAmbiguous with a position", tt.in, out, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("RepairArguments(%q): %v", tt.in, err)
			}
			if !sameAnswer(decodeAnswer(string(out)), decodeAnswer(tt.want)) {
				t.Errorf("RepairArguments(%q) = %s, want %s", tt.in, out, tt.want)
			}
		})
	}
}

// TestReaderArgumentsAmbiguous: a Reader reading a call's arguments refuses alike; and
// where the model wrote on after them (Complete: its closing tag follows), brackets
// missing at their end were lost inside, not cut off.
func TestReaderArgumentsAmbiguous(t *testing.T) {
	tests := []struct {
		name, in string
		rd       Reader
		wantErr  bool
	}{
		{"lost inner brace, then a call's closing tag", `{"x": {"a": {"b": 1, "c": 2}`, Reader{Arguments: true, Complete: true}, true},
		{"lost inner bracket, then a call's closing tag", `[[[1, 2], [3, 4]`, Reader{Arguments: true, Complete: true}, true},
		{"the outermost brace alone lost", `{"name": "f", "arguments": {"a": 1, "b": 2}`, Reader{Arguments: true, Complete: true}, false},
		{"a lost bracket with one place", `{"a": [[1, 2], [3, 4]}`, Reader{Arguments: true, Complete: true}, false},
		{"one member: one reading", `{"a": {"b": 1}`, Reader{Arguments: true, Complete: true}, false},
		{"the text may be cut there", `{"a": {"b": 1, "c": 2, "d": 3}`, Reader{Arguments: true}, false},
		{"a lost closer and a slip", `{"a": "x, "b": 2 "c": 3}`, Reader{Arguments: true}, true},
		{"not arguments", `{"a": "x, "b": 2 "c": 3}`, Reader{}, false},
		{"a string holding a brace, run to a closing tag", `{"a": "x} Let me know`, Reader{Arguments: true, Complete: true}, true},
		{"a string cut where the text ends", `{"a": "x} Let me know`, Reader{Arguments: true}, false},
		{"a string ended by a closing tag", `{"a": "Par`, Reader{Arguments: true, Complete: true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, _, ok := tt.rd.Value(tt.in, 0)
			if tt.wantErr != !ok || tt.wantErr && !errors.Is(tt.rd.Err(), ErrAmbiguous) {
				t.Fatalf("Value(%q): ok %v, err %v; want error %v", tt.in, ok, tt.rd.Err(), tt.wantErr)
			}
		})
	}
}
