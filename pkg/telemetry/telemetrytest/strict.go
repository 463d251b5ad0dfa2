// Package telemetrytest helps tests read what toolbus's telemetry writes.
package telemetrytest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
)

// StrictKeys reads one JSON log line as a strict ingester does: an object whose keys are
// each given once. It returns the top-level values as text (a nested object's as its
// JSON), and an error naming the first key given twice at any depth.
func StrictKeys(line []byte) (map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	out := map[string]string{}
	if err := strictValue(dec, "", out); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("more than one value on the line")
	}
	return out, nil
}

// strictValue reads one value; top, when not nil, receives an object's members as text.
func strictValue(dec *json.Decoder, path string, top map[string]string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch d {
	case '[':
		for dec.More() {
			if err := strictValue(dec, path+"[]", nil); err != nil {
				return err
			}
		}
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			k := kt.(string)
			if seen[k] {
				return fmt.Errorf("the key %q is given twice in %s", k, cmp.Or(path, "the line"))
			}
			seen[k] = true
			if top != nil {
				var raw json.RawMessage
				if err := dec.Decode(&raw); err != nil {
					return err
				}
				// Check the member's own keys too.
				if err := strictValue(json.NewDecoder(bytes.NewReader(raw)), path+"."+k, nil); err != nil {
					return err
				}
				var s string
				if json.Unmarshal(raw, &s) == nil {
					top[k] = s
				} else {
					top[k] = string(raw)
				}
				continue
			}
			if err := strictValue(dec, path+"."+k, nil); err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return err
}
