package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/client"
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
		// Two causes: the bucket is not there, or this user may not read it (a tenant's
		// orchestrator, which decides from the requests it receives on its approvals
		// subject).
		return nil, nil, fmt.Errorf("the %s bucket: %w (provision the streams: toolbus provision; a tenant's orchestrator may not read the bucket: it decides a call with `toolbus approve --sha256 DIGEST ID`, from the request on its approvals subject)", messages.BucketApprovals, err)
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
	show := len(positional) == 2 && positional[0] == "show"
	if !show && (len(positional) > 1 || len(positional) == 1 && positional[0] != "ls") {
		return usageError{errors.New("toolbus approvals [ls] [--all] [--json]  |  toolbus approvals show ID")}
	}
	a, done, err := openApprovals(ctx, "toolbus approvals", cf)
	if err != nil {
		return err
	}
	defer done()
	if show {
		// One request whole: every argument that runs (masked), the digest a decision
		// names, and a mark where anything is cut.
		rec, _, err := a.Get(ctx, positional[1])
		if err != nil {
			return err
		}
		if rec.Truncated {
			fmt.Fprintf(env.Stderr, "toolbus approvals: the arguments of %s are cut here; approving runs all of them (sha256 %s)\n", rec.ID, rec.ArgumentsSHA256)
		}
		return writeJSON(env.Stdout, policy.Shown(rec))
	}
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
	fmt.Fprintln(tw, "ID\tSTATE\tASKED\tDEADLINE\tCONVERSATION\tTOOL\tRULE\tARGUMENTS SHA256\tARGUMENTS")
	for _, rec := range shown {
		args := string(rec.Arguments)
		if len(args) > 120 || rec.Truncated {
			// A visible mark where anything is cut: the whole is one command away.
			args = fmt.Sprintf("%s… [%d bytes shown of the arguments%s: toolbus approvals show %s]", strings.ToValidUTF8(args[:min(len(args), 100)], ""),
				len(rec.Arguments), map[bool]string{true: ", CUT", false: ""}[rec.Truncated], rec.ID)
		}
		state := rec.State
		if rec.DecidedBy != "" {
			state += " by " + rec.DecidedBy
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", rec.ID, state, rec.RequestedAt.Local().Format(time.DateTime),
			rec.Deadline.Local().Format(time.DateTime), rec.Conversation, rec.Tool, rec.Rule, rec.ArgumentsSHA256[:min(len(rec.ArgumentsSHA256), 16)], args)
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
	reason := fs.String("reason", "", "why, kept with the decision; a denial's reason is what the model reads")
	sha := fs.String("sha256", "", "the digest of the arguments you decide on (ARGUMENTS SHA256 in `toolbus approvals ls`); read from the request when this user may read it")
	positional, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 1 {
		return usageError{fmt.Errorf("toolbus %s [--reason TEXT] [--sha256 DIGEST] ID   (ID from toolbus approvals ls)", verb)}
	}
	id := positional[0]
	nc, err := cf.connect("toolbus "+verb, nil, nil)
	if err != nil {
		return err
	}
	defer nc.Close()
	// The decision is bound to the arguments the person saw: the digest given, or the
	// request's, shown here before it is decided.
	if *sha == "" {
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		kv, err := js.KeyValue(ctx, messages.BucketApprovals)
		if err != nil {
			return fmt.Errorf("cannot read the request %s (%v): give the digest of the arguments you decide on with --sha256", id, err)
		}
		rec, _, err := (&policy.Approvals{KV: kv}).Get(ctx, id)
		if err != nil {
			return err
		}
		*sha = rec.ArgumentsSHA256
		fmt.Fprintf(env.Stderr, "toolbus %s: %s %s of %s, arguments sha256 %s\n", verb, id, rec.Tool, rec.Conversation, rec.ArgumentsSHA256)
	}
	c, err := client.New(nc)
	if err != nil {
		return err
	}
	rec, err := c.Decide(ctx, id, verb == "approve", *reason, *sha)
	if err != nil {
		return err
	}
	what := "it runs now"
	if verb == "deny" {
		what = "it is answered not_allowed"
	}
	_, err = fmt.Fprintf(env.Stdout, "%s: %s %s of %s (rule %q) by %s; %s\n", rec.ID, rec.State, rec.Tool, rec.Conversation, rec.Rule, rec.DecidedBy, what)
	return err
}
