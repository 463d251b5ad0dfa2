package client_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/messages"
)

// chunksOf returns the chunks of response r stored in the chunk stream, in order: their
// numbers and their text.
func chunksOf(t *testing.T, js jetstream.JetStream, r string) ([]string, []string) {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, messages.ChunkStream(""))
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var numbers, texts []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		if m.Header.Get(messages.HeaderResponseID) == r {
			numbers = append(numbers, m.Header.Get(messages.HeaderChunk))
			texts = append(texts, string(m.Data))
		}
	}
	return numbers, texts
}

// What is written while a chunk is on its way goes out together as the next chunk:
// the chunks hold the text written, in order, numbered 1, 2, …, fewer than the writes.
// A write flushed is a chunk of its own.
func TestStreamCoalescesWrites(t *testing.T) {
	nc, js := bustest.Provisioned(t)
	c, err := client.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := c.Stream(ctx, "c1", &client.StreamOptions{SubmitOptions: client.SubmitOptions{ResponseID: "fast"}})
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for i := range 200 {
		piece := fmt.Sprintf("token%d ", i)
		want.WriteString(piece)
		if _, err := s.WriteString(piece); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	numbers, texts := chunksOf(t, js, "fast")
	if strings.Join(texts, "") != want.String() || len(numbers) != s.Chunks() || len(numbers) >= 200 || len(numbers) == 0 {
		t.Fatalf("%d chunks (Chunks %d) for 200 writes, text %q", len(numbers), s.Chunks(), strings.Join(texts, ""))
	}
	for i, n := range numbers {
		if n != strconv.Itoa(i+1) {
			t.Fatalf("chunk numbers %v", numbers)
		}
	}
	t.Logf("200 writes sent as %d chunks", len(numbers))

	f, err := c.Stream(ctx, "c1", &client.StreamOptions{SubmitOptions: client.SubmitOptions{ResponseID: "flushed"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, piece := range []string{"a", "b", "c"} {
		if _, err := f.WriteString(piece); err != nil {
			t.Fatal(err)
		}
		if err := f.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, texts := chunksOf(t, js, "flushed"); !slices.Equal(texts, []string{"a", "b", "c"}) {
		t.Fatalf("flushed writes as chunks %q", texts)
	}
}

// A chunk that cannot be stored (here: over the server's payload limit) stops the
// stream: the next Write and Close return its error, and Close lets go of the stream
// (a second Close says it was closed).
func TestStreamStopsAtAChunkNotStored(t *testing.T) {
	nc, _ := bustest.Provisioned(t)
	c, err := client.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := c.Stream(ctx, "c1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(make([]byte, nc.MaxPayload()+1)); err != nil {
		t.Fatalf("the write itself: %v", err)
	}
	if err := s.Flush(ctx); err == nil {
		t.Fatal("a chunk over the payload limit was stored")
	}
	if _, err := s.WriteString("more"); err == nil {
		t.Fatal("a write after the failed chunk was taken")
	}
	if _, err := s.Close(ctx); err == nil {
		t.Fatal("Close after the failed chunk succeeded")
	}
	if _, err := s.Close(ctx); err == nil || !strings.Contains(err.Error(), "closed twice") {
		t.Fatalf("a second Close: %v", err)
	}
}
