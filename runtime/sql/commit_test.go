package sqlruntime

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
)

// cutProxy relays a database's TCP traffic until the client sends a
// message holding trigger. Then, with answer false, it cuts the
// connection without passing the message on (the server never saw it);
// with answer true, it passes the message on and cuts the connection once
// the server starts answering (the server acted, and its answer is lost).
type cutProxy struct {
	t       *testing.T
	ln      net.Listener
	target  string
	trigger []byte
	answer  bool
	fired   atomic.Bool
	dialed  sync.Map // the addresses the runtime asked to dial
}

func newCutProxy(t *testing.T, target, trigger string, answer bool) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{t: t, ln: ln, target: target, trigger: []byte(trigger), answer: answer}
	t.Cleanup(func() { ln.Close() })
	go p.serve()
	return p
}

// dial is the runtime's Config.Dial: every connection goes through the
// proxy, whatever address was asked for.
func (p *cutProxy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	p.dialed.Store(network+" "+addr, true)
	var d net.Dialer
	return d.DialContext(ctx, "tcp", p.ln.Addr().String())
}

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		go p.relay(c, s)
	}
}

func (p *cutProxy) relay(client, server net.Conn) {
	cut := func() { client.Close(); server.Close() }
	swallow := make(chan struct{})
	go func() { // server to client
		buf := make([]byte, 64<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 {
				select {
				case <-swallow:
					cut() // the answer to the triggering message is lost
					return
				default:
				}
				if _, werr := client.Write(buf[:n]); werr != nil {
					cut()
					return
				}
			}
			if err != nil {
				cut()
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			if bytes.Contains(bytes.ToLower(buf[:n]), p.trigger) && p.fired.CompareAndSwap(false, true) {
				if !p.answer {
					cut()
					return
				}
				close(swallow)
			}
			if _, werr := server.Write(buf[:n]); werr != nil {
				cut()
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				cut()
			}
			server.Close()
			return
		}
	}
}

// TestCommitBoundary: a connection lost before the statement reached the
// server releases the claim and changed nothing; a connection lost once
// COMMIT was written is uncertain, whether or not the server committed,
// and in the case where it did the change is there: retrying it as if
// nothing happened would make it twice.
func TestCommitBoundary(t *testing.T) {
	t.Parallel()
	for _, be := range backends[:2] {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			target := "127.0.0.1:5432"
			if be.name == "mysql" {
				target = "127.0.0.1:3306"
			}
			for _, tc := range []struct {
				name    string
				trigger string
				answer  bool
				kind    handler.OutcomeKind
				rows    int
			}{
				{"lost before the statement", "insert into items", false, handler.Release, 0},
				// COMMIT was written and never arrived: from the client's
				// side this is the lost answer below, so it is uncertain
				// too, and a person finds nothing was done.
				{"commit lost on the way", "commit", false, handler.Held, 0},
				{"commit answer lost", "commit", true, handler.Held, 1},
			} {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					proxy := newCutProxy(t, target, tc.trigger, tc.answer)
					f := open(t, be, Config{Dial: func(*toolplane.Connection) (func(context.Context, string, string) (net.Conn, error), error) {
						return proxy.dial, nil
					}})
					d := tool(toolplane.EffectWrite, `INSERT INTO items (name) VALUES (:name)`, 0, "name")
					b, err := f.rt.Bind(d)
					if err != nil {
						t.Fatal(err)
					}
					_, err = f.run(b, map[string]any{"name": "once"}, 5*time.Second)
					if !proxy.fired.Load() {
						t.Fatalf("the proxy never saw %q (%v)", tc.trigger, err)
					}
					o := outcome(t, b, err)
					if o.Kind != tc.kind {
						t.Fatalf("outcome %+v (%v), want kind %v", o, err, tc.kind)
					}
					if tc.kind == handler.Held && !strings.Contains(o.Reason, "may have been made") {
						t.Fatalf("reason %q", o.Reason)
					}
					// The server rolls back a transaction whose session it
					// lost; give it a moment to notice.
					deadline := time.Now().Add(5 * time.Second)
					for f.count("WHERE name = 'once'") != tc.rows {
						if time.Now().After(deadline) {
							t.Fatalf("%d rows named once, want %d", f.count("WHERE name = 'once'"), tc.rows)
						}
						time.Sleep(50 * time.Millisecond)
					}
					ok := false
					proxy.dialed.Range(func(k, _ any) bool {
						ok = k == "tcp "+target
						return !ok
					})
					if !ok {
						t.Fatal("the runtime did not hand Dial the host the connection names")
					}
				})
			}
		})
	}
}
