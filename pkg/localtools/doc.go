// Package localtools owns the tools that run inside the executor process, with no
// server to deploy and no network hop. A [Registry] is a value: build one, add tools,
// hand it to the executor, which lists them in the catalog and routes calls to them
// before any remote server's tool of the same name.
//
// # Go functions
//
// [AddFunc] registers a typed function. Its input schema is inferred from the argument
// struct, as the go-sdk's mcp.AddTool does, and every call's arguments are checked
// against it before the function runs:
//
//	type weatherIn struct {
//		City string `json:"city" jsonschema:"the city, in English"`
//	}
//	type weatherOut struct {
//		TempC float64 `json:"temp_c"`
//	}
//	reg := localtools.New()
//	err := localtools.AddFunc(reg, messages.ToolInfo{Name: "weather", Description: "Current weather.", ReadOnly: true},
//		func(ctx context.Context, in weatherIn) (weatherOut, error) { return lookUp(ctx, in.City) })
//
// A function's error reaches the model as tool_error unless it is a
// *messages.ToolError with its own code. [Registry.Add] takes a [Tool] with a raw
// [Func] for tools that handle JSON themselves.
//
// Tools added through [Registry.Server] belong to an in-process server, named as an MCP
// server's tools are ([Tool.Name]): AddFunc(reg.Server("calc"), ...) of "add" is called
// "calc__add", "mcp__calc__add", "calc::add", or "add" when no other tool has it
// ([Registry.Resolve]), and allow-lists name it so.
//
// # A tools folder
//
// A [Folder] holds tools in any language: an executable NAME beside NAME.mcp.json,
//
//	{"name": "word_count", "description": "Counts words.",
//	 "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
//	 "annotations": {"readOnlyHint": true}, "timeout": "5s"}
//
// The executable reads the arguments as JSON on stdin and prints one JSON value on
// stdout; a non-zero exit is a failure whose message is the last lines of stderr. It
// gets only the environment the configuration allows, and is killed with every process
// it started when it exits or its timeout passes (pkg/reaper). Tools added, changed
// or removed in the folder are picked up without a restart.
//
// Instead of an executable, NAME.py may define execute(params) and return the result,
// as lollms's local tools do; python3 runs it through a small runner (what it prints
// goes to stderr; an exception is the failure, with its type and message). A tool may
// also sit in a folder of its own, NAME/NAME.mcp.json with its program beside it.
//
// # Built-in tools
//
// [Clock] tells the time; [KnowledgeBase] is search_knowledge_base, BM25 full-text search
// over a folder of Markdown and text files in any language; [FileWriter] is file_writer,
// atomic writes confined to one folder. [Configure] turns them and a tools folder on
// from the "local" section of the configuration, [Config].
package localtools
