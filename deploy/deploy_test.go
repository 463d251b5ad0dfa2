package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/toolbus/toolbus/deploy"
	"github.com/toolbus/toolbus/internal/console"
	"github.com/toolbus/toolbus/internal/mcptest"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/policy"
	"github.com/toolbus/toolbus/pkg/telemetry"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

const (
	baseConf    = "nats.conf"
	tenantsConf = "nats-tenants.conf"
	clusterConf = "nats-cluster.conf"
	// account holds toolbus's users; sysAccount is the server's system account.
	account    = "TOOLBUS"
	sysAccount = "SYS"
	orchestr   = "orchestrator"
	consoleU   = "console"
)

// twoTenants are the tenants of nats-tenants.conf.
var twoTenants = []string{"acme", "globex"}

// users of nats.conf: one per service, the orchestrator, an admin and the system user.
var users = []string{"sys", "admin", toolbus.Parser, toolbus.Executor, toolbus.Formatter, toolbus.Healthd, orchestr, consoleU}

// setPasswords puts a fresh password for every user in the environment, as compose's .env
// does, and returns them.
func setPasswords(t *testing.T) map[string]string {
	t.Helper()
	pw := map[string]string{}
	for _, u := range slices.Concat(users, twoTenants) {
		pw[u] = u + "-" + nuid.Next()
		t.Setenv(deploy.PasswordVar(u), pw[u])
	}
	return pw
}

func loadConf(t *testing.T, file string) *server.Options {
	t.Helper()
	opts, err := server.ProcessConfigFile(file)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return opts
}

// permissionsOf returns each user's account and permissions.
func permissionsOf(t *testing.T, opts *server.Options) map[string]*server.User {
	t.Helper()
	out := map[string]*server.User{}
	for _, u := range opts.Users {
		out[u.Username] = u
	}
	return out
}

func TestNATSConfig(t *testing.T) {
	pw := setPasswords(t)
	base := loadConf(t, baseConf)

	if !base.JetStream {
		t.Error("JetStream is off")
	}
	if base.MaxPayload != 1<<20 {
		t.Errorf("max_payload = %d, want 1MB (what the embedded server allows)", base.MaxPayload)
	}
	if base.MaxPending < int64(base.MaxPayload)*8 || base.MaxConn <= 0 || base.JetStreamMaxStore <= 0 || base.JetStreamMaxMemory <= 0 {
		t.Errorf("limits missing: max_pending %d, max_connections %d, max_file_store %d, max_memory_store %d",
			base.MaxPending, base.MaxConn, base.JetStreamMaxStore, base.JetStreamMaxMemory)
	}
	if base.SystemAccount != sysAccount {
		t.Errorf("system_account = %q, want %s", base.SystemAccount, sysAccount)
	}
	if base.NoAuthUser != "" || base.Username != "" || base.Authorization != "" {
		t.Error("the server must not let anyone in without a user of its own")
	}
	got := permissionsOf(t, base)
	for _, u := range users {
		cu, ok := got[u]
		if !ok {
			t.Errorf("no user %q", u)
			continue
		}
		if cu.Password != pw[u] {
			t.Errorf("user %s: the password does not come from $%s", u, deploy.PasswordVar(u))
		}
		want := account
		if u == "sys" {
			want = sysAccount
		}
		if cu.Account == nil || cu.Account.GetName() != want {
			t.Errorf("user %s is not in account %s", u, want)
		}
		if (cu.Permissions == nil) != (u == "admin" || u == "sys") {
			t.Errorf("user %s: only admin and sys may go without permissions", u)
		}
	}
	if len(got) != len(users) {
		t.Errorf("users = %v, want exactly %v", slices.Sorted(maps.Keys(got)), users)
	}

	// The cluster variant is the base plus the cluster block: same users, same permissions.
	for i, name := range []string{"nats-1", "nats-2", "nats-3"} {
		t.Setenv("NATS_SERVER_NAME", name)
		cl := loadConf(t, clusterConf)
		if cl.ServerName != name {
			t.Errorf("%s: server_name = %q, want it from $NATS_SERVER_NAME", clusterConf, cl.ServerName)
		}
		if cl.Cluster.Name == "" || cl.Cluster.Port != 6222 {
			t.Errorf("%s: cluster name %q port %d", clusterConf, cl.Cluster.Name, cl.Cluster.Port)
		}
		var hosts []string
		for _, r := range cl.Routes {
			hosts = append(hosts, r.Hostname())
			if r.Port() != "6222" {
				t.Errorf("route %s: not the cluster port", r)
			}
		}
		if !slices.Equal(hosts, []string{"nats-1", "nats-2", "nats-3"}) {
			t.Errorf("routes go to %v, want the three nodes", hosts)
		}
		if i == 0 {
			clUsers := permissionsOf(t, cl)
			for _, u := range users {
				if !reflect.DeepEqual(got[u].Permissions, clUsers[u].Permissions) {
					t.Errorf("user %s: permissions differ between %s and %s", u, baseConf, clusterConf)
				}
			}
			if cl.JetStream != base.JetStream || cl.MaxPayload != base.MaxPayload || cl.SystemAccount != base.SystemAccount {
				t.Errorf("%s does not carry the base's JetStream, limits and system account", clusterConf)
			}
		}
	}

	// A missing password is an error, not an empty password.
	os.Unsetenv(deploy.PasswordVar(toolbus.Parser))
	if _, err := server.ProcessConfigFile(baseConf); err == nil {
		t.Errorf("%s loads without $%s", baseConf, deploy.PasswordVar(toolbus.Parser))
	}
}

// allowed reports whether p lets a client use subject (no wildcards).
func allowed(p *server.SubjectPermission, subject string) bool {
	if p == nil {
		return true
	}
	ok := len(p.Allow) == 0
	for _, a := range p.Allow {
		if server.SubjectMatchesFilter(subject, a) {
			ok = true
			break
		}
	}
	for _, d := range p.Deny {
		if server.SubjectMatchesFilter(subject, d) {
			return false
		}
	}
	return ok
}

// serviceNeeds is what each toolbus service does on NATS, derived from the code: the
// streams, consumers and buckets bus.Topology provisions, each stage's consumer
// (pkg/bus.Consume: fetch and ack) and the buckets pkg/toolbus hands each service
// (read and written, or watched: the parser follows the catalog, the executor the health
// bucket and the catalog it mirrors, healthd lists the health bucket).
type serviceNeeds struct {
	publish   []string
	subscribe []string
}

func needs() map[string]serviceNeeds {
	topo := bus.Topology{}
	// Every service checks (bus.Check) that every stream, consumer and bucket exists as
	// it should; `toolbus provision`, as admin, made them.
	provision := []string{"$JS.API.INFO"}
	var streams []string
	for _, s := range topo.Streams() {
		streams = append(streams, s.Name)
	}
	for _, b := range topo.Buckets() {
		streams = append(streams, "KV_"+b.Bucket)
	}
	for _, b := range topo.ObjectStores() {
		streams = append(streams, "OBJ_"+b.Bucket)
	}
	for _, s := range streams {
		provision = append(provision, "$JS.API.STREAM.INFO."+s)
	}
	streamOf := map[string]string{}
	for stream, c := range topo.Consumers() {
		provision = append(provision, "$JS.API.CONSUMER.INFO."+stream+"."+c.Durable)
		streamOf[c.Durable] = stream
	}
	consume := func(durable string) []string {
		s := streamOf[durable]
		return []string{
			"$JS.API.CONSUMER.INFO." + s + "." + durable,
			"$JS.API.CONSUMER.MSG.NEXT." + s + "." + durable,
			"$JS.ACK." + s + "." + durable + ".1.2.3.4.5.6",
		}
	}
	kv := func(bucket string) []string {
		return []string{
			"$KV." + bucket + ".some-key",
			"$JS.API.DIRECT.GET.KV_" + bucket + ".$KV." + bucket + ".some-key",
			"$JS.API.DIRECT.GET.KV_" + bucket,
			"$JS.API.STREAM.MSG.GET.KV_" + bucket,
		}
	}
	// A key-value watcher (WatchAll, ListKeys) is an ordered consumer with flow control.
	watch := func(bucket string) []string {
		return []string{
			"$JS.API.CONSUMER.CREATE.KV_" + bucket + ".abc_1.$KV." + bucket + ".>",
			"$JS.API.CONSUMER.DELETE.KV_" + bucket + ".abc_1",
			"$JS.FC.KV_" + bucket + ".abc_1.1.2.3",
			"$JS.API.DIRECT.GET.KV_" + bucket + ".$KV." + bucket + ".some-key",
		}
	}
	// Storing a result in the object store: chunks, metadata, reading the metadata (never
	// a purge: pkg/results never stores over an object).
	objPut := []string{
		"$O." + messages.BucketResults + ".C.abc", "$O." + messages.BucketResults + ".M.bmFtZQ==",
		"$JS.API.DIRECT.GET.OBJ_" + messages.BucketResults + ".$O." + messages.BucketResults + ".M.bmFtZQ==",
	}
	msgs := func(stream string) []string {
		return []string{"$JS.API.STREAM.MSG.GET." + stream, "$JS.API.STREAM.MSG.DELETE." + stream}
	}
	service := func(name string) []string {
		return []string{messages.InboxPrefix(name) + ".abc.def", "$SRV.PING", "$SRV.INFO.toolbus-" + name, messages.StatusSubject(name)}
	}
	cat := func(parts ...[]string) []string { return slices.Concat(parts...) }
	return map[string]serviceNeeds{
		toolbus.Parser: {
			publish: cat(provision, consume(messages.ConsumerParser), watch(messages.BucketCatalog), kv(messages.BucketGather),
				[]string{messages.CallSubject("c1"), messages.OutputSubject("c1"), messages.DeadSubject("c1"), messages.StreamSubject("c1"),
					messages.RejectedSubject(messages.ResponseSubject("x+y")), messages.RejectedSubject(messages.StreamSubject("acme.x+y"))}),
			subscribe: service(toolbus.Parser),
		},
		// The executor's replicas also run the dead-letter handler (pkg/executor,
		// RunDeadLetters): it reads and deletes messages that ran out of deliveries in the
		// work queues and answers them, a lost response with an output.
		toolbus.Executor: {
			publish: cat(provision, consume(messages.ConsumerExecutor), consume(messages.ConsumerDeadLetter),
				kv(messages.BucketCalls), kv(messages.BucketSessions), kv(messages.BucketOwners), kv(messages.BucketCatalog), kv(messages.BucketLimits), objPut,
				kv(messages.BucketApprovals), watch(messages.BucketApprovals), watch(messages.BucketCatalog), watch(messages.BucketAuth),
				// A decided call is sent again (pkg/policy Approvals.Follow).
				[]string{messages.ResultSubject("c1"), messages.DeadSubject("c1"), messages.OutputSubject("c1"), messages.ProgressSubject("c1"), messages.ExecSubject("executor-abc"),
					messages.ApprovalSubject("c1"), messages.CallSubject("c1"), messages.SampleSubject("c1")},
				msgs(messages.StreamResponses), msgs(messages.StreamCalls), msgs(messages.StreamResults)),
			subscribe: append(service(toolbus.Executor), messages.ExecSubject("executor-abc"), messages.AnswerSubject("c1", "abc"), messages.AnswerSubject("acme.c1", "abc"), messages.ProbeSubject("srv")),
		},
		toolbus.Formatter: {
			publish:   cat(provision, consume(messages.ConsumerFormatter), kv(messages.BucketGather), objPut, []string{messages.OutputSubject("c1"), messages.CallSubject("c1"), messages.DeadSubject("c1")}),
			subscribe: service(toolbus.Formatter),
		},
		toolbus.Healthd: {
			publish:   cat(provision, kv(messages.BucketHealth), watch(messages.BucketHealth), []string{messages.HealthSubject("srv"), messages.ProbeSubject("srv")}),
			subscribe: service(toolbus.Healthd),
		},
		// pkg/client: publish responses (JetStream, acked to an inbox), subscribe outputs,
		// and read TOOLBUS_OUTPUT with an ordered consumer (Client.Wait).
		orchestr: {
			publish: []string{
				messages.ResponseSubject("c1"),
				"$JS.API.STREAM.INFO." + messages.StreamOutput,
				"$JS.API.CONSUMER.CREATE." + messages.StreamOutput + ".abc_1." + messages.OutputSubject("c1"),
				"$JS.API.CONSUMER.MSG.NEXT." + messages.StreamOutput + ".abc_1",
				"$JS.API.CONSUMER.DELETE." + messages.StreamOutput + ".abc_1",
				"$JS.API.STREAM.INFO.OBJ_" + messages.BucketResults,
				"$JS.API.DIRECT.GET.OBJ_" + messages.BucketResults + ".$O." + messages.BucketResults + ".M.bmFtZQ==",
				"$JS.API.CONSUMER.CREATE.OBJ_" + messages.BucketResults + ".abc_1.$O." + messages.BucketResults + ".C.abc",
				"$JS.FC.OBJ_" + messages.BucketResults + ".abc_1.1.2.3",
			},
			subscribe: []string{messages.OutputSubject("c1"), messages.InboxPrefix(orchestr) + ".abc.def"},
		},
	}
}

// denied is what each user must not do: the least-privilege half of the permissions.
// Besides these, no service may create or update a stream or a stage's consumer
// (TestServicesMayNotProvision).
var denied = map[string]serviceNeeds{
	toolbus.Parser: {publish: []string{messages.ResultSubject("c1"), messages.ResponseSubject("c1"), "$O." + messages.BucketResults + ".C.abc",
		"$KV." + messages.BucketCalls + ".k", "$KV." + messages.BucketLimits + ".k", "$JS.API.STREAM.DELETE." + messages.StreamCalls, "$JS.API.STREAM.PURGE." + messages.StreamResponses,
		"$JS.API.STREAM.MSG.DELETE." + messages.StreamResponses, messages.ExecSubject("executor-abc")}},
	toolbus.Executor: {publish: []string{messages.ResponseSubject("c1"), "$KV." + messages.BucketGather + ".k",
		"$JS.API.CONSUMER.MSG.NEXT." + messages.StreamResponses + "." + messages.ConsumerParser, "$JS.API.STREAM.MSG.DELETE." + messages.StreamOutput}},
	toolbus.Formatter: {publish: []string{messages.ResultSubject("c1"), "$KV." + messages.BucketSessions + ".k", messages.ExecSubject("executor-abc")}},
	toolbus.Healthd: {publish: []string{messages.ResultSubject("c1"), messages.OutputSubject("c1"), messages.CallSubject("c1"), messages.ExecSubject("executor-abc")},
		subscribe: []string{messages.CallSubject("c1"), messages.StatusSubject(toolbus.Executor)}},
	consoleU: {publish: []string{messages.CallSubject("c1"), messages.ResultSubject("c1"), messages.OutputSubject("c1"), messages.StreamSubject("c1"),
		"$KV." + messages.BucketHealth + ".s", "$KV." + messages.BucketLimits + ".k", "$JS.API.STREAM.PURGE." + messages.StreamDead, "$JS.API.STREAM.MSG.DELETE." + messages.StreamDead,
		"$JS.API.CONSUMER.MSG.NEXT." + messages.StreamCalls + "." + messages.ConsumerExecutor}},
	orchestr: {
		publish: []string{messages.CallSubject("c1"), messages.ResultSubject("c1"), messages.OutputSubject("c1"), messages.HealthSubject("s"),
			"$KV." + messages.BucketSessions + ".c1", "$JS.API.STREAM.CREATE." + messages.StreamResponses,
			"$JS.API.STREAM.DELETE." + messages.StreamOutput, "$JS.API.STREAM.PURGE." + messages.StreamOutput,
			"$JS.API.CONSUMER.MSG.NEXT." + messages.StreamCalls + "." + messages.ConsumerExecutor,
			"$JS.API.DIRECT.GET.KV_" + messages.BucketCalls, messages.ExecSubject("executor-abc"), "$KV." + messages.BucketOwners + ".k",
			"$KV." + messages.BucketLimits + ".k"},
		subscribe: []string{messages.CallSubject("c1"), messages.ResultSubject("c1"), messages.ResponseSubject("c1"), messages.HealthSubject("s"), messages.ExecSubject("executor-abc")},
	},
}

// TestPermissionsFitTheCode checks nats.conf statically against what the code does: each
// user may do what its service needs, and not what it must not.
func TestPermissionsFitTheCode(t *testing.T) {
	setPasswords(t)
	for _, file := range []string{baseConf, tenantsConf} {
		perms := permissionsOf(t, loadConf(t, file))
		check := func(user string, n serviceNeeds, want bool) {
			t.Helper()
			p := perms[user].Permissions
			for _, op := range []struct {
				name     string
				sp       *server.SubjectPermission
				subjects []string
			}{{"publish", p.Publish, n.publish}, {"subscribe", p.Subscribe, n.subscribe}} {
				for _, s := range op.subjects {
					if allowed(op.sp, s) != want {
						t.Errorf("%s: %s may %s %s: %v, want %v", file, user, op.name, s, !want, want)
					}
				}
			}
		}
		for user, n := range needs() {
			check(user, n, true)
		}
		for user, n := range denied {
			check(user, n, false)
		}
		// Nobody reads another's replies: each user subscribes to its own inbox prefix
		// only; and no user but admin may purge a stream, an object store's included.
		everyone := slices.Clone(users)
		if file == tenantsConf {
			everyone = append(everyone, twoTenants...)
		}
		for _, user := range everyone {
			if user == "admin" || user == "sys" {
				continue
			}
			check(user, serviceNeeds{
				publish: []string{"$JS.API.STREAM.PURGE.OBJ_" + messages.BucketResults, "$JS.API.STREAM.PURGE." + messages.StreamOutput,
					"$JS.API.STREAM.PURGE.KV_" + messages.BucketCalls, "$JS.API.STREAM.PURGE.OBJ_" + messages.ResultsBucket("acme"),
					"$JS.API.STREAM.PURGE." + messages.OutputStream("acme")},
				subscribe: []string{"_INBOX.>", "_INBOX.abc.def", messages.InboxPrefix("admin") + ".abc", messages.InboxPrefix(other(user)) + ".abc"},
			}, false)
		}
		if file != tenantsConf {
			continue
		}
		// The services work for every tenant: they check its stream and bucket, and the
		// executor and formatter store its results.
		for _, tenant := range twoTenants {
			res := messages.ResultsBucket(tenant)
			inspect := []string{"$JS.API.STREAM.INFO." + messages.OutputStream(tenant), "$JS.API.STREAM.INFO.OBJ_" + res}
			store := []string{"$O." + res + ".C.abc", "$O." + res + ".M.bmFtZQ==", "$JS.API.DIRECT.GET.OBJ_" + res + ".$O." + res + ".M.bmFtZQ=="}
			for _, svc := range toolbus.AllServices() {
				n := serviceNeeds{publish: inspect}
				if svc == toolbus.Executor || svc == toolbus.Formatter {
					n.publish = slices.Concat(inspect, store)
				}
				check(svc, n, true)
			}
		}
		// Each tenant may do what an orchestrator does, on its own conversations, stream
		// and bucket, and nothing of another tenant's or the default one's.
		for _, tenant := range twoTenants {
			check(tenant, orchestratorNeeds(tenant), true)
			for _, other := range []string{"", "acme", "globex"} {
				if other != tenant {
					n := orchestratorNeeds(other)
					n.publish = slices.DeleteFunc(n.publish, everyOrchestrators)
					check(tenant, n, false)
				}
			}
			check(tenant, serviceNeeds{publish: []string{
				"$JS.API.STREAM.DELETE." + messages.OutputStream(tenant), "$JS.API.STREAM.UPDATE." + messages.OutputStream(tenant),
				"$JS.API.STREAM.MSG.DELETE." + messages.OutputStream(tenant), "$JS.API.STREAM.PURGE." + messages.OutputStream(tenant),
				"$O." + messages.ResultsBucket(tenant) + ".C.abc", "$JS.API.STREAM.PURGE.OBJ_" + messages.ResultsBucket(tenant),
				messages.CallSubject(tenant + ".c1"), messages.ResultSubject(tenant + ".c1"), messages.OutputSubject(tenant + ".c1"),
				"$JS.API.CONSUMER.CREATE." + messages.StreamCalls + ".x." + messages.CallSubject(tenant+".c1"), "$JS.API.STREAM.INFO." + messages.StreamDead,
			}, subscribe: []string{messages.CallSubject(tenant + ".c1"), messages.ResultSubject(tenant + ".c1"), messages.DeadSubject(tenant + ".c1")}}, false)
		}
		check(orchestr, orchestratorNeeds(""), true)
		for _, tenant := range twoTenants {
			n := orchestratorNeeds(tenant)
			n.publish = slices.DeleteFunc(n.publish, everyOrchestrators)
			check(orchestr, n, false)
		}
	}
}

// everyOrchestrators reports whether subject is one every tenant's orchestrator may
// publish: JetStream's account info and stream names, and the catalog's reads (tools,
// no tenant's data).
func everyOrchestrators(subject string) bool {
	return subject == "$JS.API.INFO" || subject == "$JS.API.STREAM.NAMES" || strings.Contains(subject, "KV_"+messages.BucketCatalog)
}

// orchestratorNeeds is what a tenant's orchestrator does (pkg/client, `toolbus mcp`,
// nats.js, the nats CLI): publish its responses, read its outputs and progress by
// subscription and with consumers of its own, fetch its stored results, answer its
// servers' questions, follow the catalog.
func orchestratorNeeds(tenant string) serviceNeeds {
	conv := "c1"
	if tenant != "" {
		conv = tenant + ".c1"
	}
	out, res, user := messages.OutputStream(tenant), messages.ResultsBucket(tenant), deploy.TenantUser(tenant)
	return serviceNeeds{
		publish: []string{
			messages.ResponseSubject(conv), messages.StreamSubject(conv), messages.AnswerSubject(conv, "abc"), "$JS.API.INFO", "$JS.API.STREAM.NAMES",
			"$JS.API.STREAM.INFO." + out,
			"$JS.API.CONSUMER.CREATE." + out + ".abc_1." + messages.OutputSubject(conv),
			"$JS.API.CONSUMER.CREATE." + out + ".reader",
			"$JS.API.CONSUMER.MSG.NEXT." + out + ".abc_1", "$JS.API.CONSUMER.DELETE." + out + ".abc_1", "$JS.API.CONSUMER.INFO." + out + ".abc_1",
			"$JS.ACK." + out + ".reader.1.2.3.4.5", "$JS.FC." + out + ".abc_1.1.2.3",
			"$JS.API.DIRECT.GET." + out + "." + messages.OutputSubject(conv), "$JS.API.STREAM.MSG.GET." + out,
			"$JS.API.STREAM.INFO.OBJ_" + res,
			"$JS.API.DIRECT.GET.OBJ_" + res + ".$O." + res + ".M.bmFtZQ==",
			"$JS.API.CONSUMER.CREATE.OBJ_" + res + ".abc_1.$O." + res + ".C.abc",
			"$JS.FC.OBJ_" + res + ".abc_1.1.2.3",
			// The catalog, read and followed (the MCP front door, `toolbus tools`).
			"$JS.API.STREAM.INFO.KV_" + messages.BucketCatalog,
			"$JS.API.DIRECT.GET.KV_" + messages.BucketCatalog + ".$KV." + messages.BucketCatalog + ".tool",
			"$JS.API.CONSUMER.CREATE.KV_" + messages.BucketCatalog + ".abc_1.$KV." + messages.BucketCatalog + ".>",
			"$JS.FC.KV_" + messages.BucketCatalog + ".abc_1.1.2.3",
		},
		subscribe: []string{messages.OutputSubject(conv), messages.ProgressSubject(conv), messages.ElicitSubject(conv), messages.SampleSubject(conv), messages.ApprovalSubject(conv),
			messages.RejectedSubject(messages.ResponseSubject(conv + "+x")), messages.InboxPrefix(user) + ".abc.def"},
	}
}

// other is a user of nats.conf other than user.
func other(user string) string {
	if user == toolbus.Executor {
		return toolbus.Parser
	}
	return toolbus.Executor
}

// TestConfigsAreGenerated holds the checked-in NATS configurations to their generator
// (`toolbus nats-conf`): nobody edits a right by hand in one file and not the other.
func TestConfigsAreGenerated(t *testing.T) {
	for file, tenants := range map[string][]string{baseConf: nil, tenantsConf: twoTenants} {
		want, err := deploy.NATSConf(tenants)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what `toolbus nats-conf%s` writes: run it again", file, strings.Repeat(" --tenant X", len(tenants)))
		}
	}
}

// TestPermissionsSpellNamesLikeTheCode fails on a subject in nats.conf that names a
// stream, consumer, bucket or subject pkg/messages does not define: a typo there grants
// nothing and breaks a service only at run time.
func TestPermissionsSpellNamesLikeTheCode(t *testing.T) {
	setPasswords(t)
	words := map[string]bool{
		"$JS": true, "API": true, "INFO": true, "STREAM": true, "CONSUMER": true, "CREATE": true, "UPDATE": true,
		"DELETE": true, "DURABLE": true, "MSG": true, "GET": true, "NEXT": true, "DIRECT": true, "ACK": true, "FC": true,
		"$KV": true, "$SRV": true, "_INBOX": true, ">": true, "*": true, "PURGE": true, "$O": true, "LIST": true, "NAMES": true,
	}
	for _, u := range users { // inbox prefixes
		words[u] = true
	}
	for _, s := range []string{messages.AllResponses, messages.AllCalls, messages.AllResults, messages.AllOutputs, messages.AllHealth, messages.AllDead, messages.AllElicit, messages.AllStream, messages.AllProgress, messages.AllExec, messages.AllAnswers, messages.AllProbes,
		messages.AllApprovals, messages.AllDecisions, messages.AllSample, messages.AllRejected, messages.TenantRejectedSubject(""),
		messages.StatusSubject(toolbus.Parser), messages.StatusSubject(toolbus.Executor), messages.StatusSubject(toolbus.Formatter), messages.StatusSubject(toolbus.Healthd)} {
		for _, w := range strings.Split(s, ".") {
			words[w] = true
		}
	}
	topo := bus.Topology{}
	for _, name := range twoTenants {
		topo.Tenants = append(topo.Tenants, bus.Tenant{Name: name})
		words[name] = true
	}
	for _, s := range topo.Streams() {
		words[s.Name] = true
	}
	for _, b := range topo.Buckets() {
		words[b.Bucket], words["KV_"+b.Bucket] = true, true
	}
	for _, b := range topo.ObjectStores() {
		words[b.Bucket], words["OBJ_"+b.Bucket] = true, true
	}
	for _, c := range topo.Consumers() {
		words[c.Durable] = true
	}
	for _, u := range slices.Concat(loadConf(t, baseConf).Users, loadConf(t, tenantsConf).Users) {
		if u.Permissions == nil {
			continue
		}
		p := u.Permissions
		for _, sp := range []*server.SubjectPermission{p.Publish, p.Subscribe} {
			if sp == nil {
				continue
			}
			for _, s := range slices.Concat(sp.Allow, sp.Deny) {
				for _, w := range strings.Split(s, ".") {
					if !words[w] {
						t.Errorf("user %s: %q in %q is no name of toolbus or of the NATS API", u.Username, w, s)
					}
				}
			}
		}
	}
}

// startServer runs opts in process on a random port with its store in a test directory.
func startServer(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	opts.Host, opts.Port = "127.0.0.1", server.RANDOM_PORT
	opts.HTTPPort = 0
	opts.StoreDir = t.TempDir()
	opts.NoLog, opts.NoSigs = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

// asyncErrors collects a connection's asynchronous errors: permission violations.
type asyncErrors chan error

func (e asyncErrors) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	select {
	case e <- err:
	default:
	}
}

// expect waits for the violation of op ("publish" or "subscription") on subject.
func (e asyncErrors) expect(t *testing.T, user, op, subject string) {
	t.Helper()
	want := strings.ToLower(fmt.Sprintf("permissions violation for %s to %q", op, subject))
	timeout := time.After(10 * time.Second)
	for {
		select {
		case err := <-e:
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(strings.ToLower(err.Error()), want) {
				return
			}
		case <-timeout:
			t.Errorf("%s: no %s", user, want)
			return
		}
	}
}

// none fails on any asynchronous error seen so far.
func (e asyncErrors) none(t *testing.T, user string) {
	t.Helper()
	for {
		select {
		case err := <-e:
			t.Errorf("%s: %v", user, err)
		default:
			return
		}
	}
}

// connectAs connects to urls as user.
func connectAs(t *testing.T, urls []string, user, password string) (*nats.Conn, asyncErrors) {
	t.Helper()
	errs := make(asyncErrors, 256)
	nc, err := nats.Connect(strings.Join(urls, ","), nats.UserInfo(user, password), nats.Name("toolbus "+user),
		nats.CustomInboxPrefix(messages.InboxPrefix(user)),
		nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.ErrorHandler(errs.handler))
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	return nc, errs
}

// service is one service started by startServices: its connection's asynchronous
// errors and its /metrics.
type service struct {
	errs    asyncErrors
	metrics http.Handler
}

// scrape reads the service's /metrics.
func (s service) scrape(t *testing.T) string {
	t.Helper()
	rec := httptest.NewRecorder()
	s.metrics.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: %d", rec.Code)
	}
	return rec.Body.String()
}

// startServices runs each service on a connection of its own, as its own user, the way
// the per-service binaries do, each with its /metrics.
func startServices(t *testing.T, urls []string, pw map[string]string, topo bus.Topology) map[string]service {
	t.Helper()
	return startServicesWith(t, urls, pw, topo, nil)
}

// startServicesWith is startServices with a configuration (nil: the default one).
func startServicesWith(t *testing.T, urls []string, pw map[string]string, topo bus.Topology, cfg *config.Config) map[string]service {
	t.Helper()
	// Provisioning is admin's, once; the services only check it.
	anc, _ := connectAs(t, urls, "admin", pw["admin"])
	ajs, err := jetstream.New(anc)
	if err != nil {
		t.Fatal(err)
	}
	bustest.ProvisionCluster(t, ajs, topo)
	ctx, cancel := context.WithCancel(context.Background())
	services := map[string]service{}
	var nodes []*toolbus.Toolbus
	for _, name := range toolbus.AllServices() {
		nc, e := connectAs(t, urls, name, pw[name])
		mp, metrics, err := telemetry.NewPrometheus(nil)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		n, err := toolbus.Start(ctx, toolbus.Options{Conn: nc, Services: []string{name}, Topology: topo, Tools: bigReport(t), MeterProvider: mp, Config: cfg})
		if err != nil {
			cancel()
			t.Fatalf("%s under its own user: %v", name, err)
		}
		services[name] = service{errs: e, metrics: metrics}
		nodes = append(nodes, n)
	}
	t.Cleanup(func() {
		cancel()
		for _, n := range nodes {
			if err := n.Wait(); err != nil {
				t.Errorf("service: %v", err)
			}
		}
	})
	return services
}

// bigReportBytes is the size of big_report's result: too large to travel inline.
const bigReportBytes = 300 << 10

// bigReport is a local tool whose result is kept in the results object store.
func bigReport(t *testing.T) *localtools.Registry {
	reg := localtools.New()
	err := localtools.AddFunc(reg, messages.ToolInfo{Name: "big_report", Description: "a large result", ReadOnly: true},
		func(_ context.Context, in struct {
			Fill string `json:"fill"`
		}) (string, error) {
			return strings.Repeat(in.Fill, bigReportBytes), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// askAll runs responses through the pipeline as the orchestrator and checks the outputs.
func askAll(t *testing.T, c *client.Client) {
	t.Helper()
	// Each exchange gets its own minute: on a loaded machine (the suite run twice at
	// once) a three-node cluster took over a minute for all of them together.
	step := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t.Cleanup(cancel)
		return ctx
	}
	cases := []struct {
		name, conv, text string
		kind             messages.OutputKind
		tools            []string
	}{
		{"no call", "perm-1", "Nothing to call here.", messages.KindNoToolCall, nil},
		{"local tool", "perm-1", `<tool_call>{"name": "clock", "arguments": {}}</tool_call>`, messages.KindToolResults, []string{"clock"}},
		{"activate (sessions bucket)", "perm-2", `<tool_call>{"name": "dispatch_engineering", "arguments": {"domain": "geometry", "action": "activate"}}</tool_call>`,
			messages.KindToolResults, []string{"dispatch_engineering"}},
		{"two calls (gather bucket)", "perm-2", `<tool_call>{"name": "clock", "arguments": {}}</tool_call>
<tool_call>{"name": "execute_tool", "arguments": {"tool_name": "geometry.solve_circle_area", "parameters": {"r": 2}}}</tool_call>`,
			messages.KindToolResults, []string{"clock", "execute_tool"}},
		{"calls in order (segments: parser saves the plan, formatter releases calls)", "perm-4", `<tool_call>{"name": "dispatch_engineering", "arguments": {"domain": "geometry", "action": "activate"}}</tool_call>
<tool_call>{"name": "execute_tool", "arguments": {"tool_name": "geometry.solve_circle_area", "parameters": {"r": 2}}}</tool_call>
<tool_call>{"name": "execute_tool", "arguments": {"tool_name": "geometry.solve_circle_area", "parameters": {"r": 3}}}</tool_call>`,
			messages.KindToolResults, []string{"dispatch_engineering", "execute_tool", "execute_tool"}},
	}
	// A result too large to travel inline is stored by the executor, under its user, and
	// read back whole by the orchestrator, under its own.
	out, err := c.Ask(step(), "perm-5", `<tool_call>{"name": "big_report", "arguments": {"fill": "x"}}</tool_call>`, nil)
	if err != nil {
		t.Fatalf("large result: %v", err)
	}
	if r := out.Results[0]; !r.Success || r.Stored == nil {
		t.Fatalf("large result: %+v, want a success stored whole", r)
	}
	if whole, err := c.FetchResult(step(), out.Results[0].Stored); err != nil || len(whole) != bigReportBytes+2 {
		t.Fatalf("large result: fetched %d bytes, %v; want %d", len(whole), err, bigReportBytes+2)
	}
	for _, tc := range cases {
		out, err := c.Ask(step(), tc.conv, tc.text, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if out.Kind != tc.kind || len(out.Results) != len(tc.tools) {
			t.Fatalf("%s: got %s with %d results, want %s with %d", tc.name, out.Kind, len(out.Results), tc.kind, len(tc.tools))
		}
		for i, r := range out.Results {
			if !r.Success || r.Tool != tc.tools[i] {
				t.Errorf("%s: result %d = %+v, want a successful %s", tc.name, i, r, tc.tools[i])
			}
		}
	}
	// A streamed response: chunks (the parser's stream consumer, its text and state in
	// the gather bucket), calls released by the parser and by the formatter, the end
	// through the executor, progress to the orchestrator.
	var progress atomic.Int32
	ctx := step()
	s, err := c.Stream(ctx, "perm-6", &client.StreamOptions{SubmitOptions: client.SubmitOptions{Reasoning: "tagged"},
		Progress: func(messages.ToolResult) { progress.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	text := cases[4].text
	for i := 0; i < len(text); i += 16 {
		if _, err := s.WriteString(text[i:min(i+16, len(text))]); err != nil {
			t.Fatalf("stream: %v", err)
		}
	}
	out, err = s.Close(ctx)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(out.Results) != 3 || progress.Load() != 3 {
		t.Fatalf("stream: %d results, %d progress reports: %s", len(out.Results), progress.Load(), out.Text)
	}
	for i, r := range out.Results {
		if !r.Success || r.Tool != cases[4].tools[i] {
			t.Errorf("stream: result %d = %+v, want a successful %s", i, r, cases[4].tools[i])
		}
	}
}

// TestPermissionsOnServer serves nats.conf for real: the services run under their own
// users (the permissions are enough), and what the users must not do is refused.
func TestPermissionsOnServer(t *testing.T) {
	pw := setPasswords(t)
	srv := startServer(t, loadConf(t, baseConf))
	urls := []string{srv.ClientURL()}

	// Nobody gets in without a user and its password.
	if nc, err := nats.Connect(srv.ClientURL()); err == nil {
		nc.Close()
		t.Error("connected without a user")
	}
	if nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo(toolbus.Parser, pw[toolbus.Executor])); err == nil {
		nc.Close()
		t.Error("connected as parser with the executor's password")
	}

	// A call of one conversation waits for a person's approval (pkg/policy Approvals).
	cfg, err := config.Parse([]byte(`{"policy": {"rules": [{"name": "ask", "tools": ["clock"], "when": "conversation == 'perm-approve'", "effect": "approve"}]}}`),
		"perm.json", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	services := startServicesWith(t, urls, pw, bus.Topology{}, cfg)
	onc, oerrs := connectAs(t, urls, orchestr, pw[orchestr])
	c, err := client.New(onc)
	if err != nil {
		t.Fatal(err)
	}
	askAll(t, c)
	consoleUnderItsUser(t, urls, pw[consoleU])
	approvalUnderTheUsers(t, onc, c, urls, pw[consoleU])

	// No service may change what it does not own. As healthd, the least privileged: cut
	// the outputs to one message, seal the output stream, throttle the executors'
	// consumer — each refused, and nothing changed.
	hnc, _ := connectAs(t, urls, toolbus.Healthd, pw[toolbus.Healthd])
	hjs, err := jetstream.New(hnc)
	if err != nil {
		t.Fatal(err)
	}
	topo := bus.Topology{}
	var outputCfg jetstream.StreamConfig
	for _, s := range topo.Streams() {
		if s.Name == messages.StreamOutput {
			outputCfg = s
		}
	}
	attack := func(what string, f func(ctx context.Context) error) {
		t.Helper()
		actx, acancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer acancel()
		if err := f(actx); err == nil {
			t.Errorf("healthd could %s", what)
		}
	}
	trimmed := outputCfg
	trimmed.MaxMsgs = 1
	attack("cut TOOLBUS_OUTPUT to one message", func(ctx context.Context) error { _, err := hjs.UpdateStream(ctx, trimmed); return err })
	sealed := outputCfg
	sealed.Sealed = true
	attack("seal TOOLBUS_OUTPUT", func(ctx context.Context) error { _, err := hjs.UpdateStream(ctx, sealed); return err })
	throttled := topo.Consumers()[messages.StreamCalls]
	throttled.MaxAckPending = 1
	attack("throttle the executors' consumer", func(ctx context.Context) error {
		_, err := hjs.CreateOrUpdateConsumer(ctx, messages.StreamCalls, throttled)
		return err
	})
	attack("delete the calls stream", func(ctx context.Context) error { return hjs.DeleteStream(ctx, messages.StreamCalls) })
	{
		anc, _ := connectAs(t, urls, "admin", pw["admin"])
		ajs, _ := jetstream.New(anc)
		vctx, vcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer vcancel()
		if err := bus.Check(vctx, ajs, topo); err != nil {
			t.Errorf("after the attacks: %v", err)
		}
		if s, err := ajs.Stream(vctx, messages.StreamOutput); err != nil || s.CachedInfo().Config.MaxMsgs == 1 || s.CachedInfo().Config.Sealed {
			t.Errorf("TOOLBUS_OUTPUT after the attacks: %+v, %v", s.CachedInfo().Config, err)
		}
	}

	// Healthd wrote its statuses under its user.
	anc, _ := connectAs(t, urls, "admin", pw["admin"])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, _ := jetstream.New(anc)
	kv, err := js.KeyValue(ctx, messages.BucketHealth)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, "local"); err != nil {
		t.Errorf("healthd did not store a status: %v", err)
	}

	// The orchestrator reads outputs with a consumer of its own, from the stream's start.
	id, err := c.Submit(ctx, "perm-3", "no call", nil)
	if err != nil {
		t.Fatalf("orchestrator cannot publish a response: %v", err)
	}
	if out, err := c.Wait(ctx, "perm-3", id); err != nil || out.Kind != messages.KindNoToolCall {
		t.Errorf("orchestrator reading TOOLBUS_OUTPUT: %v %+v", err, out)
	}

	// Every service's /metrics asks only for what its user may read (each denied request
	// would wait out a timeout, and the server log a violation): the stages' queues come
	// from the leading healthd alone, once each.
	queues := 0
	for name, svc := range services {
		page := svc.scrape(t)
		n := strings.Count(page, "toolbus_consumer_pending{")
		if n > 0 && name != toolbus.Healthd {
			t.Errorf("%s reports the stages' queues: only the leading healthd should", name)
		}
		queues += n
		if !strings.Contains(page, "go_goroutines ") || !strings.Contains(page, "process_cpu_seconds_total ") {
			t.Errorf("%s: /metrics lacks the Go runtime's and the process's metrics", name)
		}
	}
	if queues != 5 {
		t.Errorf("%d toolbus_consumer_pending series over all services, want one per queue (5)", queues)
	}
	// Every metric the alert rules read is one the services export (toolbus_ready comes
	// from each binary's ops server, which internal/cli's tests scrape).
	var pages strings.Builder
	for _, svc := range services {
		pages.WriteString(svc.scrape(t))
	}
	for _, name := range alertMetrics(t) {
		if name != "toolbus_ready" && !regexp.MustCompile(`\n`+name+`(_bucket)?[{ ]`).MatchString(pages.String()) {
			t.Errorf("alerts.yml reads %s, which no service exports", name)
		}
	}

	// The services were never refused anything.
	for name, svc := range services {
		svc.errs.none(t, name)
	}
	oerrs.none(t, orchestr)

	// What each user must not do, refused by the server.
	pnc, perrs := connectAs(t, urls, toolbus.Parser, pw[toolbus.Parser])
	_ = pnc.Publish(messages.ResultSubject("c1"), []byte(`{"forged": true}`))
	_ = pnc.Flush()
	perrs.expect(t, toolbus.Parser, "publish", messages.ResultSubject("c1"))
	for _, s := range []string{messages.CallSubject("c1"), messages.ResultSubject("c1"), "$KV." + messages.BucketSessions + ".c1"} {
		_ = onc.Publish(s, []byte("forged"))
		_ = onc.Flush()
		oerrs.expect(t, orchestr, "publish", s)
	}
	if _, err := onc.SubscribeSync(messages.AllCalls); err == nil {
		_ = onc.Flush()
	}
	oerrs.expect(t, orchestr, "subscription", messages.AllCalls)

	// The forged result never reached the stream.
	st, err := js.Stream(ctx, messages.StreamResults)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetLastMsgForSubject(ctx, messages.ResultSubject("c1")); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("a result on %s was stored: %v", messages.ResultSubject("c1"), err)
	}
}

// TestMalformedCallUnderPermissions: a response with a call that cannot be parsed must
// still be answered when the parser may not publish results.
func TestMalformedCallUnderPermissions(t *testing.T) {
	pw := setPasswords(t)
	srv := startServer(t, loadConf(t, baseConf))
	urls := []string{srv.ClientURL()}
	startServices(t, urls, pw, bus.Topology{})
	onc, _ := connectAs(t, urls, orchestr, pw[orchestr])
	c, err := client.New(onc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := c.Ask(ctx, "perm-bad", `<tool_call>{"name": "clock", "arguments": {}}</tool_call> <tool_call>[[[ :: ]]]</tool_call>`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 2 || !out.Results[0].Success || out.Results[1].Success || out.Results[1].Error.Code != messages.CodeParseError {
		t.Errorf("output %+v", out)
	}
}

// TestClusterConfigOnServers runs three nodes from nats-cluster.conf (the routes pointed at
// this machine), provisions at three replicas under the services' users, answers a response
// and checks that the parser is refused results on the cluster too.
func TestClusterConfigOnServers(t *testing.T) {
	pw := setPasswords(t)
	// Every node routes to the first one (itself included, as in the file), which
	// introduces them to each other; JetStream needs routes on every node.
	first := mcptest.FreePort(t)
	var servers []*server.Server
	var urls []string
	for i := range 3 {
		t.Setenv("NATS_SERVER_NAME", fmt.Sprintf("nats-%d", i+1))
		opts := loadConf(t, clusterConf)
		opts.Cluster.Host, opts.Cluster.Port = "127.0.0.1", server.RANDOM_PORT
		if i == 0 {
			opts.Cluster.Port = first
		}
		opts.Routes = []*url.URL{{Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", first)}}
		s := startServer(t, opts)
		servers = append(servers, s)
		urls = append(urls, s.ClientURL())
	}
	waitForCluster(t, servers)

	anc0, _ := connectAs(t, urls, "admin", pw["admin"])
	ajs, err := jetstream.New(anc0)
	if err != nil {
		t.Fatal(err)
	}
	bustest.ProvisionCluster(t, ajs, bus.Topology{Replicas: 3})
	startServices(t, urls, pw, bus.Topology{Replicas: 3})
	onc, oerrs := connectAs(t, urls, orchestr, pw[orchestr])
	c, err := client.New(onc)
	if err != nil {
		t.Fatal(err)
	}
	askAll(t, c)
	oerrs.none(t, orchestr)

	anc, _ := connectAs(t, urls, "admin", pw["admin"])
	js, _ := jetstream.New(anc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range []string{messages.StreamCalls, "KV_" + messages.BucketSessions} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if info := st.CachedInfo(); info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
			t.Errorf("%s: replicas %d, cluster %+v", name, info.Config.Replicas, info.Cluster)
		}
	}

	pnc, perrs := connectAs(t, urls[2:], toolbus.Parser, pw[toolbus.Parser])
	_ = pnc.Publish(messages.ResultSubject("x"), []byte("forged"))
	_ = pnc.Flush()
	perrs.expect(t, toolbus.Parser, "publish", messages.ResultSubject("x"))
}

// waitForCluster waits until the nodes have elected a JetStream meta leader that knows
// all of them.
func waitForCluster(t *testing.T, servers []*server.Server) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range servers {
			if s.JetStreamIsLeader() && len(s.JetStreamClusterPeers()) == len(servers) {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no JetStream meta leader with every node after 30s")
}

// TestServicesMayNotProvision: provisioning is admin's; no service user may create,
// update (cut, seal) or delete a stream, nor create or rewrite a stage's consumer.
func TestServicesMayNotProvision(t *testing.T) {
	setPasswords(t)
	perms := permissionsOf(t, loadConf(t, baseConf))
	topo := bus.Topology{}
	var subjects []string
	for _, s := range topo.Streams() {
		subjects = append(subjects, "$JS.API.STREAM.CREATE."+s.Name, "$JS.API.STREAM.UPDATE."+s.Name, "$JS.API.STREAM.DELETE."+s.Name)
	}
	for stream, c := range topo.Consumers() {
		subjects = append(subjects, "$JS.API.CONSUMER.CREATE."+stream+"."+c.Durable, "$JS.API.CONSUMER.DURABLE.CREATE."+stream+"."+c.Durable)
	}
	for _, user := range toolbus.AllServices() {
		for _, s := range subjects {
			if allowed(perms[user].Permissions.Publish, s) {
				t.Errorf("%s may publish %s", user, s)
			}
		}
	}
}

// approvalUnderTheUsers runs a call through approval under the users' rights: the
// executor parks it in the approvals bucket and announces it, the orchestrator hears of
// it on its conversation's approvals subject, the console lists and approves it, and the
// executor, following the bucket, sends it again and runs it.
func approvalUnderTheUsers(t *testing.T, onc *nats.Conn, c *client.Client, urls []string, password string) {
	t.Helper()
	requests, err := onc.SubscribeSync(messages.ApprovalSubject("perm-approve"))
	if err != nil {
		t.Fatal(err)
	}
	if err := onc.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	answered := make(chan error, 1)
	go func() {
		out, err := c.Ask(ctx, "perm-approve", `<tool_call>{"name": "clock", "arguments": {}}</tool_call>`, nil)
		if err == nil && (len(out.Results) != 1 || !out.Results[0].Success) {
			err = fmt.Errorf("%s", out.Text)
		}
		answered <- err
	}()
	m, err := requests.NextMsgWithContext(ctx)
	if err != nil {
		t.Fatalf("approval request: %v", err)
	}
	var req messages.ApprovalRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		t.Fatal(err)
	}
	nc, errs := connectAs(t, urls, consoleU, password)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := client.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	con := &console.Console{NC: nc, JS: js, Client: cc}
	list, err := con.Approvals(ctx, false)
	if err != nil || len(list) != 1 || list[0].ID != req.ID {
		t.Fatalf("console: approvals %+v, %v", list, err)
	}
	// A decision for other arguments than those shown decides nothing.
	if _, err := con.Decide(ctx, req.ID, true, "", strings.Repeat("0", 64)); err == nil || !strings.Contains(err.Error(), "other arguments") {
		t.Fatalf("console: approving other arguments: %v", err)
	}
	d, err := con.Decide(ctx, req.ID, true, "", req.ArgumentsSHA256)
	if err != nil {
		t.Fatalf("console: approve: %v", err)
	}
	if d.DecidedBy != consoleU {
		t.Errorf("decided by %q, want the NATS user %q", d.DecidedBy, consoleU)
	}
	if err := <-answered; err != nil {
		t.Fatalf("the approved call: %v", err)
	}
	errs.none(t, consoleU)
	forgedApprovals(t, nc, cc, c, onc)
}

// forgedApprovals: what the console's user (and an orchestrator) cannot make run. A
// record written into the approvals bucket, approved, holding a call nobody asked for, is
// refused by NATS (only the executors write it); a decision on a request that does not
// exist decides nothing; and no call ran in the conversation the forged record names.
func forgedApprovals(t *testing.T, consoleNC *nats.Conn, console, orchestrator *client.Client, onc *nats.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	outputs, err := onc.SubscribeSync(messages.OutputSubject("perm-forged"))
	if err != nil {
		t.Fatal(err)
	}
	call := messages.ToolCall{ID: messages.CallID("perm-forged", "r1", 0), ResponseID: "r1", Conversation: "perm-forged", Count: 1,
		Tool: "clock", Arguments: json.RawMessage(`{}`)}
	rec := messages.Approval{ApprovalRequest: messages.ApprovalRequest{ID: policy.ApprovalID(call.ID), CallID: call.ID,
		Conversation: call.Conversation, ResponseID: call.ResponseID, Tool: "clock", ArgumentsSHA256: policy.ArgumentsHash(call.Arguments),
		Rule: "ask", RequestedAt: time.Now()}, State: messages.ApprovalApproved, DecidedBy: "alice@ops (forged)", Call: call}
	body, _ := json.Marshal(rec)
	js, _ := jetstream.New(consoleNC)
	kv, err := js.KeyValue(ctx, messages.BucketApprovals)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
	if _, err := kv.Put(wctx, rec.ID, body); err == nil {
		t.Error("the console wrote a record into the approvals bucket")
	}
	wcancel()
	for _, who := range []struct {
		name string
		c    *client.Client
	}{{consoleU, console}, {orchestr, orchestrator}} {
		if _, err := who.c.Decide(ctx, rec.ID, true, "", rec.ArgumentsSHA256); err == nil || !strings.Contains(err.Error(), "no call waits") {
			t.Errorf("%s approved a call nobody asked about: %v", who.name, err)
		}
	}
	if m, err := outputs.NextMsg(3 * time.Second); err == nil {
		t.Errorf("a forged approval ran a call: %s", m.Data)
	}
}

// consoleUnderItsUser runs what the console does as the console user: the flow (consumer
// infos, status requests), servers, tools and calls (ordered consumers on the buckets and
// the outputs), following the results while watched, a dead letter listed and redriven,
// and try it — with no permission error.
func consoleUnderItsUser(t *testing.T, urls []string, password string) {
	t.Helper()
	nc, errs := connectAs(t, urls, consoleU, password)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	con := &console.Console{NC: nc, JS: js, Client: c}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stop := con.Watch()
	defer stop()
	if f, err := con.Flow(ctx); err != nil || len(f.Queues) != 4 || f.Outputs == 0 {
		t.Errorf("console: flow %+v, %v", f, err)
	}
	if s, err := con.Servers(ctx); err != nil || len(s) == 0 {
		t.Errorf("console: servers %+v, %v", s, err)
	}
	if tools, err := con.Tools(ctx); err != nil || len(tools) == 0 {
		t.Errorf("console: tools %d, %v", len(tools), err)
	}
	if calls, err := con.Calls(ctx, console.CallFilter{Conversation: "perm-1"}); err != nil || len(calls) == 0 {
		t.Errorf("console: calls %+v, %v", calls, err)
	}
	call := messages.ToolCall{ID: "perm-7/r1/0", ResponseID: "r1", Conversation: "perm-7", Count: 1, Tool: "clock", Arguments: json.RawMessage(`{}`)}
	body, _ := json.Marshal(messages.DeadCall{Call: call, Result: messages.ResultFor(call).Fail(messages.Errorf(messages.CodeServerUnavailable, "down"))})
	if _, err := js.Publish(ctx, messages.DeadSubject("perm-7"), body); err != nil {
		t.Fatalf("console: file a dead call: %v", err)
	}
	letters, err := con.Dead(ctx)
	if err != nil || len(letters) == 0 {
		t.Fatalf("console: dead letters %+v, %v", letters, err)
	}
	if out, err := con.Redrive(ctx, letters[0].Sequence); err != nil || len(out.Results) != 1 || !out.Results[0].Success {
		t.Errorf("console: redrive %+v, %v", out, err)
	}
	if out, err := c.Ask(ctx, "perm-8", `<tool_call>{"name": "clock", "arguments": {}}</tool_call>`, nil); err != nil || len(out.Results) != 1 {
		t.Errorf("console: try %+v, %v", out, err)
	}
	errs.none(t, consoleU)
}
