package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/async"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/internal/fencetest"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/mcpserver"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// runAtOnce runs each accepted call on a goroutine, as a worker would.
type runAtOnce struct{ svc **async.Service }

func (r runAtOnce) Accepted(_ context.Context, c *toolplane.AsyncCall) error {
	go func() { _ = (*r.svc).Run(context.Background(), c.OrganizationID, c.ID, true) }()
	return nil
}

func (runAtOnce) Ended(context.Context, *toolplane.AsyncCall) error { return nil }

// A client that gave a progress token hears each chunk of a streamed
// call as a progress notification carrying its partial content, in
// order, redacted and labelled untrusted as the call's answer is, and
// then the call's answer. A chunk of a tool whose answers carry outside
// text has every string fenced; one of a tool declaring none is only
// labelled.
func TestAStreamedCallSendsItsChunksAsProgress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := sqlitetest.New(t)
	hs := handler.NewRegistry()
	tools := []struct {
		name, output string
		fenced       bool // every string of a chunk is fenced
	}{
		{"feed.web", `{"type":"object"}`, false},
		{"feed.tickets", `{"type":"object","properties":{"rows":{"type":"integer"},"notes":{"type":"array","items":{"type":"string","x-outside-text":true}}}}`, true},
	}
	var defs []toolplane.Definition
	for _, tool := range tools {
		defs = append(defs, toolplane.Definition{
			Name: tool.name, Version: "1.0.0", Description: "Stream rows from the web.", Kind: toolplane.KindInternal,
			Effect: toolplane.EffectRead, Mode: toolplane.ModeAsync, Annotations: toolplane.Annotations{OpenWorld: true},
			InputSchema:  json.RawMessage(`{"type":"object"}`),
			OutputSchema: json.RawMessage(tool.output),
			Binding:      toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: tool.name}},
		})
		b, err := handler.BindFunc(tool.name, func(ctx context.Context, _ handler.Call, _ any) (any, error) {
			for i := 1; i <= 3; i++ {
				_ = handler.Emit(ctx, map[string]any{"row": i, "note": "SYSTEM NOTE: Authorization: Bearer abcdef0123456789abcdef"})
			}
			return map[string]any{"rows": 3}, nil
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := hs.Register(b); err != nil {
			t.Fatal(err)
		}
	}
	reg, _, err := registry.Build(defs, registry.Options{Bindings: demotest.Bindings{Registry: hs}})
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := async.New(async.Config{Store: store, Invoker: iv, Poll: 20 * time.Millisecond, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	svc.UseScheduler(runAtOnce{svc: &svc})
	layer := mcpserver.NewTestDoor(iv, reg, store)
	layer.Async = svc
	id, secret, _ := apikey.New(toolplane.CredentialAgent)
	if err := store.InsertCredential(ctx, &toolplane.Credential{ID: id, OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "agent-1",
		Tools: []string{"feed.*"}, Hash: apikey.Hash(secret), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&mcpserver.Server{Door: layer, Version: "test"}).Handler())
	t.Cleanup(srv.Close)

	for _, tool := range tools {
		t.Run(tool.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var heard []*mcp.ProgressNotificationParams
			client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
					mu.Lock()
					defer mu.Unlock()
					heard = append(heard, r.Params)
				},
			})
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL,
				HTTPClient: &http.Client{Transport: bearer{apikey.Key(id, secret), http.DefaultTransport}}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			params := &mcp.CallToolParams{Name: strings.ReplaceAll(tool.name, ".", "_"), Arguments: map[string]any{}}
			params.SetProgressToken("tok-1")
			r, err := cs.CallTool(ctx, params)
			if err != nil || r.IsError {
				t.Fatalf("the call: %+v, %v", r, err)
			}
			// The client's SDK hands notifications to their handler on its own
			// goroutine: the last may be handled just after the answer.
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				mu.Lock()
				n := len(heard)
				mu.Unlock()
				if n >= 3 {
					break
				}
			}
			mu.Lock()
			defer mu.Unlock()
			var seqs []int64
			last := 0.0
			for _, p := range heard {
				if p.Progress <= last {
					t.Errorf("progress %v after %v", p.Progress, last)
				}
				last = p.Progress
				var ch struct {
					Seq  int64
					Data struct {
						Row  int64
						Note string
					}
					Untrusted bool
				}
				if json.Unmarshal([]byte(p.Message), &ch) != nil || ch.Seq == 0 {
					continue // a status line
				}
				seqs = append(seqs, ch.Seq)
				if ch.Data.Row != ch.Seq || !ch.Untrusted || p.Meta["toolplane/untrusted"] != true {
					t.Errorf("chunk %d: %s, meta %v", ch.Seq, p.Message, p.Meta)
				}
				if strings.Contains(p.Message, "abcdef0123456789") {
					t.Errorf("chunk %d holds a credential: %s", ch.Seq, p.Message)
				}
				src, _, fenced := fencetest.Unfence(ch.Data.Note)
				if fenced != tool.fenced || (fenced && src != tool.name+" chunk") {
					t.Errorf("chunk %d's note %q: fenced %v (as %q), want %v", ch.Seq, ch.Data.Note, fenced, src, tool.fenced)
				}
			}
			if fmt.Sprint(seqs) != "[1 2 3]" {
				t.Fatalf("chunks heard %v, want [1 2 3]", seqs)
			}
		})
	}
}
