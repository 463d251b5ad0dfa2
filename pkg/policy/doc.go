// Package policy owns toolbus's rules on calls and its limits on how many run: the
// configuration's "policy.rules", conditions written in CEL (the expression language of
// Kubernetes, Envoy and agentgateway) over a call's tool, server, arguments,
// conversation, tenant and time, and its "limits", calls per interval counted in a
// JetStream key-value bucket.
//
// # Rules
//
// [Compile] checks every rule once, at load time: a condition that does not parse or
// type-check is an error naming the rule and the position. [Policy.Decide] then answers
// a call with the first rule that matches it, in the order written; no match allows.
// A condition that cannot be evaluated for a call (an argument it reads is missing)
// does not match, except in a deny rule, which then denies: a rule meant to refuse
// never lets a call through by failing.
//
//	p, err := policy.Compile([]policy.Rule{{Name: "no-etc", Tools: []string{"file_writer"},
//		When: "args.file_path.startsWith('/etc')", Effect: policy.Deny}})
//	d := p.Decide(policy.Call{Tool: "file_writer", Args: []byte(`{"file_path":"/etc/passwd"}`)})
//	// d.Effect == policy.Deny, d.Rule == "no-etc"
//
// # Limits
//
// [Limiter.Take] counts a call against every [Limit] it falls under, with
// compare-and-set on one key per limit and counted value (a tenant, a conversation, a
// server, a tool), so that a limit holds across executor replicas and restarts.
package policy
