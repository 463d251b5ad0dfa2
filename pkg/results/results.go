// Package results keeps whole the results too large to travel inline, in a JetStream
// object store bucket (messages.BucketResults), and puts a preview naming them in their
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

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Fitter makes a result fit a size, keeping the whole of a larger one; [Store] is the
// one a deployment uses.
type Fitter interface {
	Fit(ctx context.Context, r messages.ToolResult, max int) (messages.ToolResult, error)
}

// Store keeps results in the object store bucket OS, called Bucket.
type Store struct {
	OS     jetstream.ObjectStore
	Bucket string
}

// Fit returns r with a result of at most about max bytes. A larger successful result is
// stored whole, named by its call id, and replaced by a preview (messages.Preview) with
// r.Stored naming it; a result stored before has its preview cut shorter. Storing again
// what is stored already (a redelivery) writes nothing.
func (s Store) Fit(ctx context.Context, r messages.ToolResult, max int) (messages.ToolResult, error) {
	if max <= 0 || len(r.Result) <= max || !r.Success || r.Stored != nil {
		return messages.CapResult(r, max), nil
	}
	sum := sha256.Sum256(r.Result)
	stored := &messages.StoredResult{Bucket: s.Bucket, Name: r.CallID, Size: len(r.Result), SHA256: hex.EncodeToString(sum[:])}
	digest := "SHA-256=" + base64.URLEncoding.EncodeToString(sum[:])
	info, err := s.OS.GetInfo(ctx, stored.Name)
	if err != nil || info.Digest != digest || info.Size != uint64(stored.Size) {
		if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			return r, fmt.Errorf("results: %s: %w", stored.Name, err)
		}
		if _, err := s.OS.Put(ctx, jetstream.ObjectMeta{Name: stored.Name, Description: "result of call " + r.CallID + " (" + r.Tool + ")"},
			bytes.NewReader(r.Result)); err != nil {
			return r, fmt.Errorf("results: store %s: %w", stored.Name, err)
		}
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
