// Package formatter is the last stage: it gathers the results of one response, in call
// order, and publishes the response's one [messages.Output] with the <tool_result>
// blocks the orchestrator feeds back to the model.
//
// [Render] is the pure part (golden-tested); [Service] is the plumbing. Gathering state
// lives in the gather key-value bucket, one key per response updated with compare-and-set,
// so any number of formatter replicas can share the work: whichever adds the last result
// publishes the output, and the output's Nats-Msg-Id (the response id) makes a repeated
// publish a no-op.
package formatter
