package mcpwire

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/toolbus/toolbus/pkg/messages"
)

// A feature tool's arguments are read or refused as invalid_arguments, never anything
// else: a read has a URI, a prompt a name, and the arguments read are what was written.
func FuzzFeatureArgs(f *testing.F) {
	for _, seed := range []struct{ remote, args string }{
		{remoteReadResource, `{"uri":"demo://resource/dynamic/text/2"}`},
		{remoteReadResource, `{"uri":""}`},
		{remoteReadResource, `{"uri":7}`},
		{remoteGetPrompt, `{"name":"args-prompt","arguments":{"city":"Lisbon","state":null}}`},
		{remoteGetPrompt, `{"name":"x","arguments":{"a":{"b":1}}}`},
		{remoteGetPrompt, `{"name":"x","arguments":null}`},
		{remoteListPrompts, `{"cursor":null}`},
		{remoteListResources, `{"cursor":"abc","more":1}`},
		{remoteListResources, ``},
		{remoteListResources, `[1]`},
		{"echo", `{}`},
	} {
		f.Add(seed.remote, seed.args)
	}
	f.Fuzz(func(t *testing.T, remote, raw string) {
		a, err := decodeFeatureArgs("t", remote, json.RawMessage(raw))
		if err != nil {
			var te *messages.ToolError
			if !errors.As(err, &te) && !errors.Is(err, ErrUnknownTool) {
				t.Fatalf("%s %q: %v is neither invalid_arguments nor unknown_tool", remote, raw, err)
			}
			if featureMethod(remote) == "" && !errors.Is(err, ErrUnknownTool) {
				t.Fatalf("%s is no feature tool, yet: %v", remote, err)
			}
			return
		}
		switch remote {
		case remoteReadResource:
			if a.URI == "" {
				t.Fatalf("%q: read without a URI", raw)
			}
		case remoteGetPrompt:
			if a.Name == "" {
				t.Fatalf("%q: a prompt without a name", raw)
			}
			var written struct{ Arguments map[string]*string }
			if json.Unmarshal([]byte(raw), &written) == nil {
				for k, v := range written.Arguments {
					if got, ok := a.promptArguments()[k]; v != nil && (!ok || got != *v) {
						t.Fatalf("%q: argument %s read as %q", raw, k, got)
					}
				}
			}
		}
	})
}
