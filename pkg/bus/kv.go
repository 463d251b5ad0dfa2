package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// GetJSON reads the JSON value at key into a T. A missing key gives the zero T and
// revision 0.
func GetJSON[T any](ctx context.Context, kv jetstream.KeyValue, key string) (T, uint64, error) {
	var v T
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return v, 0, nil
	}
	if err != nil {
		return v, 0, fmt.Errorf("%s/%s: %w", kv.Bucket(), key, err)
	}
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return v, 0, fmt.Errorf("%s/%s: %w", kv.Bucket(), key, err)
	}
	return v, e.Revision(), nil
}

// UpdateJSON applies fn to the JSON value at key with compare-and-set, reading again and
// retrying when another writer changed it first, so concurrent replicas never lose each
// other's updates. fn reports whether it changed the value; when it did not, nothing is
// written. UpdateJSON returns the value as stored.
func UpdateJSON[T any](ctx context.Context, kv jetstream.KeyValue, key string, fn func(*T) (bool, error)) (T, error) {
	v, _, err := UpdateJSONCreated(ctx, kv, key, fn)
	return v, err
}

// UpdateJSONCreated is [UpdateJSON] that also reports whether this write created the key
// (it did not exist, or its last entry was a delete).
func UpdateJSONCreated[T any](ctx context.Context, kv jetstream.KeyValue, key string, fn func(*T) (bool, error)) (T, bool, error) {
	for {
		v, rev, err := GetJSON[T](ctx, kv, key)
		if err != nil {
			return v, false, err
		}
		changed, err := fn(&v)
		if err != nil || !changed {
			return v, false, err
		}
		val, err := json.Marshal(v)
		if err != nil {
			return v, false, err
		}
		if _, err = CompareAndSet(ctx, kv, key, val, rev); err == nil {
			return v, rev == 0, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return v, false, err
		}
		if ctx.Err() != nil {
			return v, false, ctx.Err()
		}
	}
}

// CompareAndSet writes val at key over revision rev: it creates the key when rev is 0,
// else updates the key if rev is still its revision. It returns the new revision;
// jetstream.ErrKeyExists or ErrKeyRevisionMismatch (wrapped) when another wrote first.
func CompareAndSet(ctx context.Context, kv jetstream.KeyValue, key string, val []byte, rev uint64) (uint64, error) {
	var err error
	if rev == 0 {
		rev, err = kv.Create(ctx, key, val)
	} else {
		rev, err = kv.Update(ctx, key, val, rev)
	}
	if err != nil {
		return 0, fmt.Errorf("%s/%s: %w", kv.Bucket(), key, err)
	}
	return rev, nil
}
