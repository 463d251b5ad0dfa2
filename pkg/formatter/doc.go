// Package formatter is the last stage: it gathers the results of one response, in call
// order, and produces the response's one [messages.Output] with the <tool_result>
// blocks the orchestrator feeds back to the model (rendered by [messages.RenderOutput]).
//
// [Stage.Format] is the stage function, run by the bus's stage runner; it knows nothing
// of NATS. Gathering state lives behind [Gatherer]: in a deployment the gather key-value
// bucket ([KVGatherer]), one key per response updated with compare-and-set, so any number
// of formatter replicas share the work: whichever adds the last result produces the
// output, and the output's message id (the response id) makes a repeated publish a no-op.
package formatter
