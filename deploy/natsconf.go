// Package deploy holds toolbus's deployment files (nats.conf, nats-tenants.conf,
// nats-cluster.conf, toolbus.json), the generator of its NATS configurations
// (NATSConf, `toolbus nats-conf`), and the tests that hold them to the code: the NATS
// configuration is loaded with nats-server's own parser and served for real, and
// compose.yaml is read with the Compose specification's loader.
package deploy

import (
	"bytes"
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"text/template"

	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/messages"
)

//go:embed nats.conf.tmpl
var natsConfTemplate string

// Tenant is what nats.conf grants one tenant's orchestrator user: the default tenant's
// (user orchestrator, conversations of one token) or a configured tenant's (user named
// as the tenant, conversations "<tenant>.<id>").
type Tenant struct {
	Name, User, PasswordVar, Inbox string
	// Its subjects: responses and chunks it publishes; outputs, progress, servers'
	// questions and sampling requests and the rejections of its messages nobody can
	// route, which it receives.
	Responses, Chunks, Answers, Outputs, Progress, Elicit, Sample, Approvals, Rejected string
	// Its work queues of responses, whole and chunk by chunk; its output stream; its
	// stored results' bucket and that bucket's stream.
	ResponseStream, ChunkStream, OutputStream, ResultsBucket, ResultsStream string
}

// conf is the data of nats.conf.tmpl.
type conf struct {
	Tenants []Tenant // the default tenant first
	// Streams are every stream toolbus provisions (key-value and object store buckets
	// included), which every service checks exists (bus.Check).
	Streams []string
	// Consumers are the stages' durable consumers, as STREAM.DURABLE.
	Consumers []string
}

// PasswordVar is the environment variable nats.conf reads user's password from.
func PasswordVar(user string) string {
	return "TOOLBUS_" + strings.ToUpper(strings.ReplaceAll(user, "-", "_")) + "_PASSWORD"
}

// TenantUser is the NATS user of a tenant's orchestrator: orchestrator for the default
// tenant (""), the tenant's name otherwise.
func TenantUser(tenant string) string { return messages.TenantUser(tenant) }

// NATSConf returns the NATS server configuration of a deployment serving tenants besides
// the default one: deploy/nats.conf is NATSConf(nil), deploy/nats-tenants.conf
// NATSConf([]string{"acme", "globex"}). Every right in it comes with its reason.
func NATSConf(tenants []string) ([]byte, error) {
	topo := bus.Topology{}
	for _, name := range tenants {
		if err := messages.ValidateTenant(name); err != nil {
			return nil, err
		}
		topo.Tenants = append(topo.Tenants, bus.Tenant{Name: name})
	}
	var c conf
	for _, name := range topo.TenantNames() {
		user := TenantUser(name)
		c.Tenants = append(c.Tenants, Tenant{
			Name: name, User: user, PasswordVar: PasswordVar(user), Inbox: messages.InboxPrefix(user),
			Responses: messages.TenantSubjects(messages.ResponseSubject, name), Chunks: messages.TenantSubjects(messages.StreamSubject, name),
			Answers: messages.AnswerSubjects(name),
			Outputs: messages.TenantSubjects(messages.OutputSubject, name), Progress: messages.TenantSubjects(messages.ProgressSubject, name),
			Elicit: messages.TenantSubjects(messages.ElicitSubject, name), Sample: messages.TenantSubjects(messages.SampleSubject, name), Approvals: messages.TenantSubjects(messages.ApprovalSubject, name),
			Rejected:       messages.TenantRejectedSubject(name),
			ResponseStream: messages.ResponseStream(name), ChunkStream: messages.ChunkStream(name),
			OutputStream: messages.OutputStream(name), ResultsBucket: messages.ResultsBucket(name), ResultsStream: "OBJ_" + messages.ResultsBucket(name),
		})
	}
	for _, s := range topo.Streams() {
		c.Streams = append(c.Streams, s.Name)
	}
	for _, b := range topo.Buckets() {
		c.Streams = append(c.Streams, "KV_"+b.Bucket)
	}
	for _, b := range topo.ObjectStores() {
		c.Streams = append(c.Streams, "OBJ_"+b.Bucket)
	}
	for stream, cc := range topo.Consumers() {
		c.Consumers = append(c.Consumers, stream+"."+cc.Durable)
	}
	slices.Sort(c.Consumers)
	t, err := template.New("nats.conf").Option("missingkey=error").Parse(natsConfTemplate)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, c); err != nil {
		return nil, fmt.Errorf("nats.conf: %w", err)
	}
	return b.Bytes(), nil
}
