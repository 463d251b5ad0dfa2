package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/policy"
)

// openApprovals connects for a command on the approvals bucket.
func openApprovals(ctx context.Context, name string, cf connectFlags) (*policy.Approvals, func(), error) {
	nc, err := cf.connect(name, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	kv, err := js.KeyValue(ctx, messages.BucketApprovals)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("the %s bucket: %w (provision the streams: toolbus provision)", messages.BucketApprovals, err)
	}
	return &policy.Approvals{KV: kv}, nc.Close, nil
}

// approvalsCmd lists the calls that wait for a person's decision, and those decided.
func approvalsCmd(ctx context.Context, env Env, args []string) error {
	fs := newFlags("approvals", env)
	cf := addConnectFlags(fs, env)
	asJSON := fs.Bool("json", false, "print JSON")
	all := fs.Bool("all", false, "list the decided calls too (kept a week), not only those waiting")
	positional, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(positional) > 1 || len(positional) == 1 && positional[0] != "ls" {
		return usageError{errors.New("toolbus approvals [ls] [--all] [--json]")}
	}
	a, done, err := openApprovals(ctx, "toolbus approvals", cf)
	if err != nil {
		return err
	}
	defer done()
	list, err := a.List(ctx)
	if err != nil {
		return err
	}
	shown := list[:0]
	for _, rec := range list {
		if *all || rec.State == messages.ApprovalPending {
			rec.Call = messages.ToolCall{} // its arguments unmasked: never printed
			shown = append(shown, rec)
		}
	}
	if *asJSON {
		return writeJSON(env.Stdout, shown)
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tASKED\tDEADLINE\tCONVERSATION\tTOOL\tRULE\tARGUMENTS")
	for _, rec := range shown {
		args := string(rec.Arguments)
		if len(args) > 120 {
			args = args[:117] + "..."
		}
		state := rec.State
		if rec.DecidedBy != "" {
			state += " by " + rec.DecidedBy
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", rec.ID, state, rec.RequestedAt.Local().Format(time.DateTime),
			rec.Deadline.Local().Format(time.DateTime), rec.Conversation, rec.Tool, rec.Rule, args)
	}
	return tw.Flush()
}

// approveCmd and denyCmd decide a waiting call.
func approveCmd(ctx context.Context, env Env, args []string) error {
	return decideCmd(ctx, env, "approve", args)
}
func denyCmd(ctx context.Context, env Env, args []string) error {
	return decideCmd(ctx, env, "deny", args)
}

func decideCmd(ctx context.Context, env Env, verb string, args []string) error {
	fs := newFlags(verb, env)
	cf := addConnectFlags(fs, env)
	by := fs.String("by", whoAmI(), "who decides, kept with the decision")
	reason := fs.String("reason", "", "why, kept with the decision; a denial's reason is what the model reads")
	positional, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 1 {
		return usageError{fmt.Errorf("toolbus %s [--reason TEXT] ID   (ID from toolbus approvals ls)", verb)}
	}
	a, done, err := openApprovals(ctx, "toolbus "+verb, cf)
	if err != nil {
		return err
	}
	defer done()
	rec, err := a.Decide(ctx, positional[0], verb == "approve", *by, *reason)
	if err != nil {
		return err
	}
	what := "it runs now"
	if verb == "deny" {
		what = "it is answered not_allowed"
	}
	_, err = fmt.Fprintf(env.Stdout, "%s: %s %s of %s (rule %q); %s\n", rec.ID, rec.State, rec.Tool, rec.Conversation, rec.Rule, what)
	return err
}

// whoAmI names the person deciding: the login name and host.
func whoAmI() string {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if host, err := os.Hostname(); err == nil && host != "" {
		name += "@" + host
	}
	return name
}
