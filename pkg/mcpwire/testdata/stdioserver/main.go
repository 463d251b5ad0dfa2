// Command stdioserver is the MCP server of mcpwire's stdio tests: it reports its process
// id, so that a test can kill it and see it restarted, and can start a child of its own
// that must not outlive it.
package main

import (
	"context"
	"log"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type pidOut struct {
	PID int `json:"pid"`
}

type sleepIn struct {
	Marker string `json:"marker"`
}

type echoIn struct {
	Text string `json:"text"`
	// Times repeats the text in the answer.
	Times int `json:"times,omitempty"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "grandchild" {
		time.Sleep(time.Hour) // lives until killed
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "stdioserver"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "pid", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, pidOut, error) {
			return nil, pidOut{PID: os.Getpid()}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "traceparent", Description: "Returns the traceparent of the request's _meta."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			tp, _ := req.Params.Meta["traceparent"].(string)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: tp}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "conversation", Description: "Returns the toolbus/conversation of the request's _meta, and its toolbus/tenant when there is one.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			c, _ := req.Params.Meta["toolbus/conversation"].(string)
			if tenant, ok := req.Params.Meta["toolbus/tenant"].(string); ok {
				c += " tenant=" + tenant
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: c}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "echo"},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat(in.Text, max(in.Times, 1))}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Touches marker, then waits to be cancelled."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in sleepIn) (*mcp.CallToolResult, any, error) {
			if err := os.WriteFile(in.Marker, nil, 0o644); err != nil {
				return nil, nil, err
			}
			<-ctx.Done()
			return nil, nil, ctx.Err()
		})
	if os.Getenv("STDIOSERVER_GRANDCHILD") != "" {
		// Like npx, leave a process of our own behind the server; like a daemon, in a
		// session of its own.
		gc := exec.Command(os.Args[0], "grandchild")
		gc.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := gc.Start(); err != nil {
			log.Fatal(err)
		}
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Print(err)
	}
}
