package client_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/client"
)

// A conversation of a tenant the deployment does not serve (no output stream of its
// own) is refused at once, not waited for until the deadline: its response would be
// dead-lettered.
func TestTenantNotServed(t *testing.T) {
	nc, _ := bustest.Provisioned(t)
	c, err := client.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Ask(ctx, "acme.c1", "hello", nil); err == nil || !strings.Contains(err.Error(), `serves no tenant "acme"`) {
		t.Errorf("Ask: %v", err)
	}
	if _, err := c.Stream(ctx, "acme.c1", nil); err == nil || !strings.Contains(err.Error(), `serves no tenant "acme"`) {
		t.Errorf("Stream: %v", err)
	}
	if _, err := c.Submit(ctx, "c1", "hello", nil); err != nil {
		t.Errorf("the default tenant: %v", err)
	}
}
