package mcpwire

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What one call of a server's tool sends: the server's own tools go out as tools/call,
// those it runs as tasks as a task (tasks.go), and the tools toolbus makes of its
// resources and prompts as their requests (features.go).

// offer is what a listing makes of a server's tools: the feature tools appended, and
// the tools that run as tasks noted (tasks.go).
func (s *server) offer(ctx context.Context, sess session, tools []*mcp.Tool) []*mcp.Tool {
	if ms, ok := sess.(*mcpSession); ok {
		modes := ms.tasks.snapshot()
		s.taskModes.Store(&modes)
	}
	return append(tools, s.featureTools(ctx, sess, tools)...)
}

// taskMode is how the server runs tool as a task: required, optional, or "" for never.
func (s *server) taskMode(tool string) string {
	if m := s.taskModes.Load(); m != nil {
		return (*m)[tool]
	}
	return ""
}

// send runs one call of tool on sess: a feature tool's request, a tool that runs as a
// task as one (tasks.go), else tools/call; a tool's resource links are then named with
// the tool that reads them.
func (s *server) send(ctx context.Context, sess session, tool string, args json.RawMessage) (*mcp.CallToolResult, error) {
	if s.feature(tool) {
		ms, ok := sess.(*mcpSession)
		if !ok {
			return nil, fmt.Errorf("%w: %s has no %s", ErrUnknownTool, s.name, tool)
		}
		a, err := decodeFeatureArgs(tool, tool, args)
		if err != nil {
			return nil, err
		}
		if tool == remoteSubscribe || tool == remoteUnsubscribe {
			return s.subscription(ctx, ms, tool, a)
		}
		return ms.callFeature(ctx, tool, a)
	}
	var res *mcp.CallToolResult
	var err error
	if ms, ok := sess.(*mcpSession); ok && ms.raw != nil && s.taskMode(tool) != "" {
		res, err = ms.callAsTask(ctx, tool, args, func(step float64, message string) {
			s.pool.progress.report(ctx, s.pool.opts.Progress, step, message)
		})
	} else {
		res, err = sess.callTool(ctx, tool, args)
	}
	if err == nil {
		s.pool.linkNote(s.name, res)
	}
	return res, err
}
