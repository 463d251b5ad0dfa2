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
	"slices"
	"strconv"
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
// r.Stored naming it; a result stored before has its preview cut shorter. The data of its
// content blocks (images, audio: messages.Content) counts too: while they and the result
// are larger than max, the largest block is stored, named by the call id and its place
// ("<call id>/content/<n>"), and its Stored names it. Storing again what is stored already
// (a redelivery) writes nothing.
func (s *Store) Fit(ctx context.Context, r messages.ToolResult, max int) (messages.ToolResult, error) {
	if max <= 0 || r.InlineBytes() <= max || !r.Success {
		return messages.CapResult(r, max), nil
	}
	bucket := messages.ResultsBucket(messages.Tenant(r.Conversation))
	os, err := s.bucket(ctx, bucket)
	if err != nil {
		return r, err
	}
	if len(r.Content) > 0 {
		if r.Content, err = s.fitContent(ctx, os, bucket, r, max); err != nil {
			return r, err
		}
	}
	if len(r.Result) <= max || r.Stored != nil {
		return messages.CapResult(r, max), nil
	}
	stored, err := put(ctx, os, bucket, r.CallID, "result of call "+r.CallID+" ("+r.Tool+")", r.Result)
	if err != nil {
		return r, err
	}
	r.Result = messages.Preview(r.Result, max, stored)
	r.Stored = stored
	return r, nil
}

// fitContent stores the largest of r's content blocks with inline data, one after
// another, until they and the result fit max, and returns the blocks (a copy, when any
// changed).
func (s *Store) fitContent(ctx context.Context, os jetstream.ObjectStore, bucket string, r messages.ToolResult, max int) ([]messages.Content, error) {
	cs := r.Content
	copied := false
	// What the blocks may take: what the result leaves, or half when it is stored and
	// becomes a preview of about half of max.
	room := max - len(r.Result)
	if len(r.Result) > max {
		room = max / 2
	}
	for messages.ContentBytes(cs) > room {
		big := -1
		for i := range cs {
			if n := len(cs[i].Inline()); n > 0 && (big < 0 || n > len(cs[big].Inline())) {
				big = i
			}
		}
		if big < 0 {
			break
		}
		c := cs[big]
		data, err := c.Decode()
		if err != nil {
			// Not base64 after all: it cannot be named by its bytes; it is left out.
			data = []byte(c.Inline())
		}
		name := r.CallID + "/content/" + strconv.Itoa(big+1)
		stored, err := put(ctx, os, bucket, name, c.Type+" "+strconv.Itoa(big+1)+" of call "+r.CallID+" ("+r.Tool+")", data)
		if err != nil {
			return r.Content, err
		}
		if !copied {
			cs, copied = slices.Clone(cs), true
		}
		if c.Resource != nil {
			res := *c.Resource
			c.Resource = &res
		}
		c.SetInline("")
		c.Stored, c.Size = stored, len(data)
		cs[big] = c
	}
	return cs, nil
}

// put stores data under name in os, or finds it stored already; a name that holds other
// contents gets it beside it, under name@<digest>, since an object is never replaced.
func put(ctx context.Context, os jetstream.ObjectStore, bucket, name, description string, data []byte) (*messages.StoredResult, error) {
	sum := sha256.Sum256(data)
	stored := &messages.StoredResult{Bucket: bucket, Name: name, Size: len(data), SHA256: hex.EncodeToString(sum[:])}
	digest := "SHA-256=" + base64.URLEncoding.EncodeToString(sum[:])
	for attempt := 0; ; attempt++ {
		info, err := os.GetInfo(ctx, stored.Name)
		if err == nil && info.Digest == digest && info.Size == uint64(stored.Size) {
			return stored, nil // stored already
		}
		if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			return nil, fmt.Errorf("results: %s: %w", stored.Name, err)
		}
		if err == nil { // other contents under this name: never replaced
			if attempt > 0 {
				return nil, fmt.Errorf("results: %s holds other contents", stored.Name)
			}
			stored.Name = name + "@" + stored.SHA256[:16]
			continue
		}
		if _, err := os.Put(ctx, jetstream.ObjectMeta{Name: stored.Name, Description: description}, bytes.NewReader(data)); err != nil {
			return nil, fmt.Errorf("results: store %s: %w", stored.Name, err)
		}
		return stored, nil
	}
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
