// Package sessiontest is the test suite every [engineering.SessionStore] must pass. A
// store's own test calls [Run] with a constructor:
//
//	func TestKVSessions(t *testing.T) {
//		sessiontest.Run(t, func(t *testing.T) engineering.SessionStore { return newKVStore(t) })
//	}
package sessiontest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/toolbus/toolbus/pkg/engineering"
)

// Run runs the suite; newStore returns an empty store for each subtest. Conversation
// ids used are valid JetStream key-value keys.
func Run(t *testing.T, newStore func(t *testing.T) engineering.SessionStore) {
	ctx := context.Background()
	add := func(domain string) func(*engineering.Session) error {
		return func(s *engineering.Session) error {
			s.ActiveDomains = append(s.ActiveDomains, domain)
			s.AllowedTools = append(s.AllowedTools, domain+".tool")
			return nil
		}
	}

	t.Run("unknown conversation is the zero session", func(t *testing.T) {
		got, err := newStore(t).Get(ctx, "never-seen")
		if err != nil || len(got.ActiveDomains) != 0 || len(got.AllowedTools) != 0 {
			t.Fatalf("Get = %+v, %v; want the zero Session", got, err)
		}
	})

	t.Run("update persists", func(t *testing.T) {
		s := newStore(t)
		for _, d := range []string{"pressure", "geometry"} {
			if err := s.Update(ctx, "conv-1", add(d)); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.Get(ctx, "conv-1")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.ActiveDomains, []string{"pressure", "geometry"}) ||
			!slices.Equal(got.AllowedTools, []string{"pressure.tool", "geometry.tool"}) {
			t.Fatalf("Get = %+v", got)
		}
	})

	t.Run("failed update writes nothing", func(t *testing.T) {
		s := newStore(t)
		if err := s.Update(ctx, "conv-1", add("pressure")); err != nil {
			t.Fatal(err)
		}
		boom := errors.New("boom")
		err := s.Update(ctx, "conv-1", func(sess *engineering.Session) error {
			sess.ActiveDomains = append(sess.ActiveDomains, "geometry")
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Update = %v, want the function's error", err)
		}
		got, _ := s.Get(ctx, "conv-1")
		if !slices.Equal(got.ActiveDomains, []string{"pressure"}) {
			t.Fatalf("after a failed update: %+v", got)
		}
	})

	t.Run("conversations are isolated", func(t *testing.T) {
		s := newStore(t)
		if err := s.Update(ctx, "conv-a", add("pressure")); err != nil {
			t.Fatal(err)
		}
		if err := s.Update(ctx, "conv-b", add("geometry")); err != nil {
			t.Fatal(err)
		}
		a, _ := s.Get(ctx, "conv-a")
		b, _ := s.Get(ctx, "conv-b")
		if !slices.Equal(a.ActiveDomains, []string{"pressure"}) || !slices.Equal(b.ActiveDomains, []string{"geometry"}) {
			t.Fatalf("a = %+v, b = %+v", a, b)
		}
	})

	t.Run("returned sessions are copies", func(t *testing.T) {
		s := newStore(t)
		if err := s.Update(ctx, "conv-1", add("pressure")); err != nil {
			t.Fatal(err)
		}
		got, _ := s.Get(ctx, "conv-1")
		got.ActiveDomains[0] = "changed"
		again, _ := s.Get(ctx, "conv-1")
		if again.ActiveDomains[0] != "pressure" {
			t.Fatalf("changing a returned session changed the store: %+v", again)
		}
	})

	t.Run("concurrent updates are not lost", func(t *testing.T) {
		s := newStore(t)
		const workers, each = 16, 20
		var wg sync.WaitGroup
		errs := make(chan error, 2*workers*each)
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					domain := fmt.Sprintf("d%d-%d", w, i)
					err := s.Update(ctx, "conv-1", func(sess *engineering.Session) error {
						// Yield between read and write: a store that is not atomic loses updates here.
						runtime.Gosched()
						return add(domain)(sess)
					})
					if err != nil {
						errs <- err
					}
					if _, err := s.Get(ctx, "conv-1"); err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		got, _ := s.Get(ctx, "conv-1")
		if len(got.ActiveDomains) != workers*each {
			t.Fatalf("%d domains after %d concurrent updates: updates were lost", len(got.ActiveDomains), workers*each)
		}
	})

	t.Run("cancelled context", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		s := newStore(t)
		if err := s.Update(cctx, "conv-1", add("pressure")); err == nil {
			t.Fatal("Update with a cancelled context succeeded")
		}
	})
}
