// Package healthd is the health daemon: it probes every tool server on an interval and
// publishes each one's status to the health key-value bucket (one key per server) and on
// toolbus.health.<server>, where executors, `toolbus health` and orchestrators read it.
//
// # Probes
//
// [Targets] lists what a configuration asks to probe, and how:
//
//   - MCP servers (stdio, http, sse): over the session that serves their calls. The
//     leader asks the executors on toolbus.probe.<server>; one of them answers
//     ([AnswerProbes], [mcpwire.Pool.Check]) with tools/list over its live session —
//     tools/list for every protocol version, since 2026-07-28 servers have no ping. A
//     server the executor is still starting is not judged yet; one that answered a
//     call since the previous probe is up. Only a server no executor serves is probed
//     with a fresh, short-lived session of healthd's own ([mcpwire.Probe]: the go-sdk
//     client's handshake, tools/list, close; a stdio server started for the probe and
//     killed when it ends). An entry's "health": false leaves the server unprobed.
//   - jsonrpc services: one tools/list POST; any JSON-RPC answer means up.
//   - "local": the tools folder is read and every tool checked (manifest valid,
//     executable present and executable); the knowledge-base and file_writer folders
//     must exist. Unusable tools are noted in the status's error while it stays up.
//   - "engineering": in process, always up.
//
// Every target is probed in a loop of its own, each probe under the timeout (default
// 5s; an entry's probeTimeout), so a server that hangs delays nobody else. A probe records the latency, the
// negotiated protocol version, the tool count and the error.
//
// # States
//
// A server is up after one successful probe and down after Threshold (default 3)
// consecutive failures; fewer failures leave its state as it was, so one lost probe
// does not flap it, and a server that is down is up again after two consecutive
// successes, so one that answers every other probe does not flap either ([Next]).
// While its state is in question — failing but not down yet, answering but not up yet
// ([Deciding]) — it is probed every third of the interval. Every probe's status is written to the bucket and
// published on toolbus.health.<server>: a change as soon as its probe ends, and
// otherwise as a heartbeat every interval. A status whose ChangedAt equals its
// CheckedAt announces a change.
//
// # Replicas
//
// Several replicas may run; one leads and probes, the others wait. The leader holds a
// lease, the bucket's key "healthd.leader", created and renewed with compare-and-set
// every third of its TTL (default 10s). A follower takes the lease over when its
// revision has not moved for a whole TTL by the follower's own clock, so clock skew
// between hosts plays no part; a leader that stops deletes it, and a follower takes
// over within a third of the TTL. A leader that cannot renew (NATS away) stops
// probing once its lease may have expired.
//
// Status writes are compare-and-set too ([bus.UpdateJSON]): each builds on the stored
// status, so the consecutive-failure count survives a change of leader, and a former
// leader that has not noticed yet cannot overwrite its successor's update — both
// observations count. Probing on one replica keeps servers from being probed twice
// per interval and failures from being counted twice.
//
// # Example
//
//	h, err := healthd.New(ctx, nc, js, cfg, &healthd.Options{Interval: 15 * time.Second})
//	if err != nil {
//		return err
//	}
//	return h.Run(ctx) // until ctx is done
package healthd
