package deploy_test

import (
	"bytes"
	"testing"

	"github.com/nats-io/nats-server/v2/conf"

	"github.com/toolbus/toolbus/deploy"
)

// `toolbus nats-conf --accounts` is the accounts part of the whole configuration,
// byte for byte, and parses on its own.
func TestNATSAccountsArePartOfNATSConf(t *testing.T) {
	setPasswords(t)
	for _, tenants := range [][]string{nil, twoTenants} {
		whole, err := deploy.NATSConf(tenants)
		if err != nil {
			t.Fatal(err)
		}
		accounts, err := deploy.NATSAccounts(tenants)
		if err != nil {
			t.Fatal(err)
		}
		body := accounts[bytes.Index(accounts, []byte("system_account: SYS")):]
		if !bytes.HasSuffix(whole, body) {
			t.Errorf("tenants %v: the accounts are not the end of nats.conf", tenants)
		}
		m, err := conf.Parse(string(accounts))
		if err != nil {
			t.Fatalf("tenants %v: %v", tenants, err)
		}
		if m["system_account"] != "SYS" || m["accounts"] == nil || m["jetstream"] != nil || m["listen"] != nil {
			t.Errorf("tenants %v: the accounts file sets %v", tenants, keys(m))
		}
	}
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
