// Package results keeps whole the results too large to travel inline, in a JetStream
// object store bucket (messages.ResultsBucket: one per tenant), and puts a preview naming them in their
// place. The executor stores a result larger than its inline limit; the formatter stores
// results whose response's output would not fit one message otherwise. Both go through
// [Store.Fit], so a result is stored the same way whoever stores it.
package results

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Fitter makes a result fit a size, keeping the whole of a larger one; [Store] is the
// one a deployment uses.
type Fitter interface {
	Fit(ctx context.Context, r messages.ToolResult, max int) (messages.ToolResult, error)
}

// Store keeps each result in the object store bucket of its conversation's tenant
// (messages.ResultsBucket), so that a tenant's orchestrator, who may read its own bucket
// only, can fetch it. It never replaces an object (which would purge its chunks, a right
// no service has): a result stored again under its call id with other contents (a
// read-only call run again) is stored beside it, under the call id and its digest.
type Store struct {
	js      jetstream.JetStream
	buckets sync.Map // bucket name → jetstream.ObjectStore
}

// NewStore returns a Store opening buckets through js.
func NewStore(js jetstream.JetStream) *Store { return &Store{js: js} }

func (s *Store) bucket(ctx context.Context, name string) (jetstream.ObjectStore, error) {
	if os, ok := s.buckets.Load(name); ok {
		return os.(jetstream.ObjectStore), nil
	}
	os, err := s.js.ObjectStore(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("results: bucket %s: %w", name, err)
	}
	s.buckets.Store(name, os)
	return os, nil
}

// Fit returns r with a result of at most about max bytes. A larger successful result is
// stored whole, named by its call id, and replaced by a preview (messages.Preview) with
// r.Stored naming it; a result stored before has its preview cut shorter. Storing again
// what is stored already (a redelivery) writes nothing.
func (s *Store) Fit(ctx context.Context, r messages.ToolResult, max int) (messages.ToolResult, error) {
	if max <= 0 || len(r.Result) <= max || !r.Success || r.Stored != nil {
		return messages.CapResult(r, max), nil
	}
	bucket := messages.ResultsBucket(messages.Tenant(r.Conversation))
	os, err := s.bucket(ctx, bucket)
	if err != nil {
		return r, err
	}
	sum := sha256.Sum256(r.Result)
	stored := &messages.StoredResult{Bucket: bucket, Name: r.CallID, Size: len(r.Result), SHA256: hex.EncodeToString(sum[:])}
	digest := "SHA-256=" + base64.URLEncoding.EncodeToString(sum[:])
	for attempt := 0; ; attempt++ {
		info, err := os.GetInfo(ctx, stored.Name)
		if err == nil && info.Digest == digest && info.Size == uint64(stored.Size) {
			break // stored already
		}
		if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			return r, fmt.Errorf("results: %s: %w", stored.Name, err)
		}
		if err == nil { // other contents under this name: never replaced
			if attempt > 0 {
				return r, fmt.Errorf("results: %s holds other contents", stored.Name)
			}
			stored.Name = r.CallID + "@" + stored.SHA256[:16]
			continue
		}
		if _, err := os.Put(ctx, jetstream.ObjectMeta{Name: stored.Name, Description: "result of call " + r.CallID + " (" + r.Tool + ")"},
			bytes.NewReader(r.Result)); err != nil {
			return r, fmt.Errorf("results: store %s: %w", stored.Name, err)
		}
		break
	}
	r.Result = messages.Preview(r.Result, max, stored)
	r.Stored = stored
	return r, nil
}

// Fetch reads the whole result s names from its bucket and checks it against its size and
// sha256.
func Fetch(ctx context.Context, js jetstream.JetStream, s *messages.StoredResult) ([]byte, error) {
	os, err := js.ObjectStore(ctx, s.Bucket)
	if err != nil {
		return nil, fmt.Errorf("results: bucket %s: %w", s.Bucket, err)
	}
	b, err := os.GetBytes(ctx, s.Name)
	if err != nil {
		return nil, fmt.Errorf("results: %s/%s: %w", s.Bucket, s.Name, err)
	}
	sum := sha256.Sum256(b)
	if len(b) != s.Size || hex.EncodeToString(sum[:]) != s.SHA256 {
		return nil, fmt.Errorf("results: %s/%s: %d bytes with sha256 %x, want %d bytes with %s", s.Bucket, s.Name, len(b), sum, s.Size, s.SHA256)
	}
	return b, nil
}
