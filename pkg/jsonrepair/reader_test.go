package jsonrepair

import (
	"errors"
	"testing"
)

func TestReader(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		from    int
		args    bool
		want    string
		rest    string // the text after the value
		repairs Repairs
		wantErr error // nil: no error; else errors.Is target, or errSyntax for any
		errAt   int   // with wantErr: the error's offset, unless 0
	}{
		{name: "valid, not copied", text: `x: {"a": [1, 2]} and more`, from: 2, want: `{"a": [1, 2]}`, rest: " and more"},
		{name: "repaired", text: `Action: {'tool': 'clock',} then`, from: 7, want: `{"tool":"clock"}`, rest: " then", repairs: SingleQuotes | TrailingComma},
		{name: "comment before", text: `/* c */ [1 2]`, want: `[1,2]`, repairs: Comments | MissingComma},
		{name: "cut off", text: `{"a": "b`, want: `{"a":"b"}`, repairs: UnclosedString | UnclosedObject | TruncatedValue},
		{name: "argument ends at paren", text: `f(a=[1, 2), b=3)`, from: 4, args: true, want: `[1,2]`, rest: `), b=3)`, repairs: UnclosedArray},
		{name: "argument word", text: `f(unit=mm)`, from: 7, args: true, want: `"mm"`, rest: `)`, repairs: UnquotedString},
		{name: "nothing", text: "x   ", from: 1, wantErr: errSyntax},
		{name: "no value", text: `{"a": 1 : 2}`, wantErr: errSyntax},
		{name: "too deep", text: `[[[[1]]]]`, wantErr: ErrTooDeep},
		// Text read as a string whose opening quote is missing has its escapes read, and
		// one it cannot read fails the read, as in a quoted string: not "x", not "ab".
		{name: "short unicode escape in unquoted text", text: `x: {"a": x\u"} more`, from: 3, wantErr: errSyntax, errAt: 10},
		{name: "short unicode escape in unquoted element", text: `[ab\u1"]`, wantErr: errSyntax, errAt: 3},
		{name: "short unicode escape in argument", text: `f(a=x\u12", b=1)`, from: 4, args: true, wantErr: errSyntax, errAt: 5},
		{name: "short unicode escape in string", text: `{"a": "x\u"}`, wantErr: errSyntax, errAt: 8},
		{name: "unicode escape in unquoted text", text: `{"a": x\u00e9"}`, want: `{"a":"x\u00e9"}`, repairs: UnclosedString},
		{name: "backslash u kept in unquoted argument", text: `f(a=x\u1)`, from: 4, args: true, want: `"x\\u1"`, rest: `)`, repairs: UnquotedString},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rd := Reader{MaxDepth: 3, Args: tt.args}
			v, end, repairs, ok := rd.Value(tt.text, tt.from)
			if tt.wantErr != nil {
				se := rd.Err()
				if ok || se == nil || tt.wantErr != errSyntax && !errors.Is(se, tt.wantErr) {
					t.Fatalf("Value() = %q %v, error %v, want %v", v, ok, se, tt.wantErr)
				}
				if tt.errAt != 0 && se.Offset != tt.errAt {
					t.Errorf("error at %d (%v), want at %d", se.Offset, se, tt.errAt)
				}
				if _, _, _, ok := rd.AppendValue([]byte("x"), tt.text, tt.from); ok || rd.Err() == nil {
					t.Errorf("AppendValue() read a value, Value failed with %v", se)
				}
				if rd.Stopped() < se.Offset {
					t.Errorf("Stopped() = %d before the error at %d", rd.Stopped(), se.Offset)
				}
				return
			}
			if !ok || v != tt.want || tt.text[end:] != tt.rest || repairs != tt.repairs || rd.Err() != nil || rd.Stopped() != end {
				t.Errorf("Value() = %q %q %v %v (%v, stopped %d), want %q %q %v", v, tt.text[end:], repairs, ok, rd.Err(), rd.Stopped(), tt.want, tt.rest, tt.repairs)
			}
			out, end2, _, ok := rd.AppendValue([]byte("x"), tt.text, tt.from)
			if !ok || end2 != end || string(out[:1]) != "x" {
				t.Errorf("AppendValue() = %q %d %v, Value ended at %d", out, end2, ok, end)
			}
		})
	}
}

func TestRepairsNames(t *testing.T) {
	if got := (SingleQuotes | TruncatedValue | CodeFence).String(); got != "code_fence single_quotes truncated_value" {
		t.Errorf("String() = %q", got)
	}
	if got := EscapedJSON.String(); got != "escaped_json" {
		t.Errorf("String() = %q", got)
	}
	if Repairs(0).Names() != nil || Repairs(1<<63).Names() != nil || Repairs(1<<63).String() != "" {
		t.Error("bits that name no repair are named")
	}
	seen := map[string]bool{}
	for r := Repairs(1); r < 1<<numRepairs; r <<= 1 {
		if name := r.String(); name == "" || seen[name] {
			t.Errorf("repair %b is named %q", r, name)
		} else {
			seen[name] = true
		}
	}
}

func TestSkipSpace(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    int
		repairs Repairs
	}{
		{name: "none", in: `{}`, want: 0},
		{name: "json", in: " \n\t{", want: 3},
		{name: "comments", in: "// a\n/* b */ # c\n1", want: 17, repairs: Comments},
		{name: "unicode", in: "\u00a0\u3000x", want: 5, repairs: Whitespace},
		{name: "all", in: "  // x", want: 6, repairs: Comments},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, repairs := SkipSpace(tt.in, 0); got != tt.want || repairs != tt.repairs {
				t.Errorf("SkipSpace(%q) = %d %v, want %d %v", tt.in, got, repairs, tt.want, tt.repairs)
			}
		})
	}
}
