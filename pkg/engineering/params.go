package engineering

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolbus/toolbus/pkg/jsonrepair"
	"github.com/toolbus/toolbus/pkg/messages"
)

func invalidArguments(format string, args ...any) error {
	return messages.Errorf(messages.CodeInvalidArguments, format, args...)
}

// decodeParameters reads execute_tool's parameters: a JSON object, or a string holding
// one in any of the sloppy forms models write (quoted, single quotes, trailing commas,
// Python literals, ...), read with pkg/jsonrepair. It returns the repairs it applied.
func decodeParameters(raw json.RawMessage) (map[string]json.RawMessage, []string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return map[string]json.RawMessage{}, nil, nil
	}
	var repairs []string
	if raw[0] == '"' {
		s, err := messages.DecodeString(raw)
		if err != nil {
			return nil, nil, invalidArguments("parameters: %v", err)
		}
		if strings.TrimSpace(s) == "" {
			return map[string]json.RawMessage{}, nil, nil
		}
		fixed, fixes, err := jsonrepair.RepairArguments(s)
		if err != nil {
			return nil, nil, invalidArguments(`parameters were a string that is not a JSON object (%v); pass an object, like {"p": 10, "d": 100, "sigma": 160}`, err)
		}
		raw = bytes.TrimSpace(fixed)
		repairs = append(repairs, "parameters were a JSON string; decoded it as an object")
		for _, f := range fixes {
			repairs = append(repairs, "repaired the parameters' JSON: "+f)
		}
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, nil, invalidArguments(`parameters must be a JSON object, like {"p": 10, "d": 100, "sigma": 160}`)
	}
	params, err := messages.DecodeMembers(raw)
	if err != nil {
		return nil, nil, invalidArguments("parameters are not a valid JSON object: %v", err)
	}
	if params == nil {
		params = map[string]json.RawMessage{}
	}
	return params, repairs, nil
}

// readQuantity reads one numeric parameter given as a number in unitSym, a string with
// an optional unit ("10 bar", "0.1 m"), or {"value": ..., "unit": ...}, and returns it in
// unitSym. A null, "" or "?" value is absent: the variable to solve for. conv describes
// the unit conversion applied, if any.
func readQuantity(name string, raw json.RawMessage, unitSym string) (x float64, conv string, present bool, err error) {
	want, _ := lookupUnit(unitSym)
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return 0, "", false, nil
	}
	// The message for a value that is not a quantity, built only when one is found.
	usage := func() error {
		if unitSym == "1" {
			return fmt.Errorf("%s must be a plain number, like 0.85", name)
		}
		return fmt.Errorf("%s must be a number in %s or a string with a unit, like \"12 %s\"", name, unitSym, unitSym)
	}

	var v float64
	var from string
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, "", false, usage()
		}
		s = strings.TrimSpace(s)
		if s == "" || s == "?" {
			return 0, "", false, nil
		}
		if v, from, err = parseQuantity(s); err != nil {
			return 0, "", false, fmt.Errorf("%s: %v", name, err)
		}
	case '{':
		var q struct {
			Value json.RawMessage `json:"value"`
			Unit  string          `json:"unit"`
		}
		if err := json.Unmarshal(raw, &q); err != nil || len(q.Value) == 0 || q.Value[0] == '{' {
			return 0, "", false, usage()
		}
		if bytes.Equal(bytes.TrimSpace(q.Value), []byte("null")) {
			return 0, "", false, nil
		}
		if q.Unit == "" {
			return readQuantity(name, q.Value, unitSym)
		}
		var n json.Number
		if q.Value[0] == '"' {
			var s string
			_ = json.Unmarshal(q.Value, &s)
			n = json.Number(strings.TrimSpace(s))
		} else if err := json.Unmarshal(q.Value, &n); err != nil {
			return 0, "", false, usage()
		}
		if v, from, err = parseQuantity(n.String()); err != nil || from != "" {
			return 0, "", false, usage()
		}
		from = q.Unit
	default:
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return 0, "", false, usage()
		}
		if v, _, err = parseQuantity(n.String()); err != nil {
			return 0, "", false, fmt.Errorf("%s: %v", name, err)
		}
	}
	if from == "" {
		return v, "", true, nil
	}
	u, ok := lookupUnit(from)
	if !ok {
		return 0, "", false, fmt.Errorf("%s: unknown unit %q; %s takes a %s in %s", name, from, name, want.dim, strings.Join(unitsOf(want.dim), ", "))
	}
	if u.dim != want.dim {
		return 0, "", false, fmt.Errorf("%s: %q is a unit of %s, but %s is a %s (%s)", name, from, u.dim, name, want.dim, strings.Join(unitsOf(want.dim), ", "))
	}
	if u.si == want.si {
		return v, "", true, nil
	}
	return convert(v, u, want), conversionNote(name, v, u, want), true, nil
}
