// Package bus owns toolbus's use of NATS: the embedded server, the provisioning of
// streams, consumers and key-value buckets, and the loop that feeds a stage's handler
// from its durable consumer.
//
// Every service calls [Provision] at start. It is idempotent, so any number of replicas
// may run it concurrently; the first creates, the others find what they need.
package bus
