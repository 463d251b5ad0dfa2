package executor

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/toolbus/toolbus/pkg/toolcall"
)

// schemas holds the resolved input schemas of the tools calls were routed to, by
// backend and tool, each with the schema it was resolved from: a tool whose schema
// changes is resolved again.
type schemas struct{ m sync.Map } // route key → *resolvedSchema

type resolvedSchema struct {
	raw      json.RawMessage
	resolved *jsonschema.Resolved // nil: the schema cannot be resolved, nothing is checked
}

// checkArguments checks a call's arguments against its route's input schema, as the
// parser checks those of the names it knows, so that the same mistake is the same
// invalid_arguments whatever spelling of the tool's name the model wrote (a bare name,
// a qualified one, a route the configuration gives, a vendor's alias), before anything
// is sent: a remote server may answer it as its own error (isError) or as a protocol
// error. It returns the arguments with the schema's defaults applied.
func (s *schemas) checkArguments(name string, r Route, args json.RawMessage) (json.RawMessage, error) {
	raw := r.Info.InputSchema
	if len(raw) == 0 {
		return args, nil
	}
	key := r.Server + "\x00" + r.Info.Name
	var rs *resolvedSchema
	if v, ok := s.m.Load(key); ok && bytes.Equal(v.(*resolvedSchema).raw, raw) {
		rs = v.(*resolvedSchema)
	} else {
		resolved, err := toolcall.ResolveSchema(raw)
		if err != nil {
			resolved = nil // a schema the parser cannot check either: the backend decides
		}
		rs = &resolvedSchema{raw: raw, resolved: resolved}
		s.m.Store(key, rs)
	}
	if rs.resolved == nil {
		return args, nil
	}
	return toolcall.CheckArguments(name, rs.resolved, args)
}
