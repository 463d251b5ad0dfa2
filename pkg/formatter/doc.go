// Package formatter is the last stage: it gathers the results of one response, in call
// order, and produces the response's one [messages.Output] with the <tool_result>
// blocks the orchestrator feeds back to the model (rendered by [messages.RenderOutput]).
//
// [Stage.Format] is the stage function, run by the bus's stage runner; it knows nothing
// of NATS. Gathering state lives behind [Gatherer]: in a deployment the gather key-value
// bucket ([KVGatherer]), each result in a key of its own, written once, and which calls
// of the response are answered in the response's key, a few bytes updated with
// compare-and-set, so that a result costs the same however many calls its response has
// and any number of formatter replicas share the work. Whichever answers the last call
// reads the results once and produces the output; the output's message id (the
// response id) makes a repeated publish a no-op.
package formatter
