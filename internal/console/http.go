package console

import (
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/toolbus/toolbus/pkg/messages"
)

//go:embed web
var web embed.FS

// Handler serves the page and the API:
//
//	GET  /api/flow                 Flow: the stages' queues
//	GET  /api/events               the Flow every second, as server-sent events ("flow")
//	GET  /api/servers              every server's last status
//	GET  /api/tools                the catalog, with each tool's declarations
//	GET  /api/calls?conversation=&tool=&outcome=ok|failed&limit=
//	GET  /api/dead                 the newest dead letters
//	POST /api/dead/redrive?seq=N   send a dead letter's call again: its new output
//	POST /api/try                  {"conversation", "text"}: the output of that response
//
// With token set, every request must carry it (Authorization: Bearer TOKEN, or
// ?token=TOKEN, which the page then keeps in its links).
func (c *Console) Handler(token string) http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(web, "web")
	mux.Handle("GET /", http.FileServerFS(static))
	get := func(path string, f func(r *http.Request) (any, error)) {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) { reply(w, r, f) })
	}
	get("/api/flow", func(r *http.Request) (any, error) { return c.Flow(r.Context()) })
	get("/api/servers", func(r *http.Request) (any, error) { return c.Servers(r.Context()) })
	get("/api/tools", func(r *http.Request) (any, error) { return c.Tools(r.Context()) })
	get("/api/dead", func(r *http.Request) (any, error) { return c.Dead(r.Context()) })
	get("/api/calls", func(r *http.Request) (any, error) {
		q := r.URL.Query()
		limit, _ := strconv.Atoi(q.Get("limit"))
		return c.Calls(r.Context(), CallFilter{Tenant: q.Get("tenant"), Conversation: q.Get("conversation"), Tool: q.Get("tool"), Outcome: q.Get("outcome"), Limit: limit})
	})
	mux.HandleFunc("POST /api/dead/redrive", func(w http.ResponseWriter, r *http.Request) {
		reply(w, r, func(r *http.Request) (any, error) {
			seq, err := strconv.ParseUint(r.URL.Query().Get("seq"), 10, 64)
			if err != nil {
				return nil, badRequest{errors.New("seq: the dead letter's sequence number")}
			}
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
			defer cancel()
			out, err := c.Redrive(ctx, seq)
			if errors.Is(err, ErrNotRedrivable) {
				return nil, badRequest{err}
			}
			return out, err
		})
	})
	mux.HandleFunc("POST /api/try", func(w http.ResponseWriter, r *http.Request) {
		reply(w, r, func(r *http.Request) (any, error) {
			var in struct{ Conversation, Text string }
			if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil {
				return nil, badRequest{fmt.Errorf("want {\"conversation\", \"text\"}: %w", err)}
			}
			if in.Conversation == "" {
				in.Conversation = "console"
			}
			if err := messages.ValidateConversation(in.Conversation); err != nil {
				return nil, badRequest{err}
			}
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
			defer cancel()
			return c.Client.Ask(ctx, in.Conversation, in.Text, nil)
		})
	})
	mux.HandleFunc("GET /api/events", c.events)
	if token == "" {
		return mux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.URL.Query().Get("token")
		if h := r.Header.Get("Authorization"); len(h) > 7 && h[:7] == "Bearer " {
			got = h[7:]
		}
		if subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			http.Error(w, "a token is required: open the URL toolbus printed (…?token=…)", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// events streams the flow every second while the page is open.
func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	defer c.Watch()()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		f, err := c.Flow(ctx)
		cancel()
		if err == nil {
			b, _ := json.Marshal(f)
			fmt.Fprintf(w, "event: flow\ndata: %s\n\n", b)
			flusher.Flush()
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}

type badRequest struct{ error }

func reply(w http.ResponseWriter, r *http.Request, f func(*http.Request) (any, error)) {
	v, err := f(r)
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		code := http.StatusInternalServerError
		var bad badRequest
		if errors.As(err, &bad) {
			code = http.StatusBadRequest
		}
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	json.NewEncoder(w).Encode(v)
}

// Local reports whether addr (host:port) binds to the loopback interface only.
func Local(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
