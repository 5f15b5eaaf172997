package main_test

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rrProxy is a round-robin TCP load balancer with no stickiness: each new
// client connection goes to the next backend in turn, whatever it carries
// (an MCP session's next request lands on whichever node is next). A
// backend that refuses the connection is skipped; when every backend
// refuses, the client's connection is closed. Once paired, a connection is
// copied both ways until either side ends, and then both are closed, so a
// node killed mid-request is seen by the client as a dropped connection.
type rrProxy struct {
	ln       net.Listener
	backends []string
	next     atomic.Uint64

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// newRRProxy listens on a free loopback port in front of backends
// (host:port each) until the test ends.
func newRRProxy(t *testing.T, backends ...string) *rrProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &rrProxy{ln: ln, backends: backends, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.Close)
	return p
}

// URL is the proxy's base URL.
func (p *rrProxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *rrProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.pair(c)
	}
}

// pair connects c to the next backend that accepts a connection.
func (p *rrProxy) pair(c net.Conn) {
	defer p.wg.Done()
	var b net.Conn
	for range p.backends {
		addr := p.backends[(p.next.Add(1)-1)%uint64(len(p.backends))]
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			b = conn
			break
		}
	}
	if b == nil || !p.track(c, b) {
		c.Close()
		if b != nil {
			b.Close()
		}
		return
	}
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(b, c)
	go cp(c, b)
	<-done // either side ended: end both
	c.Close()
	b.Close()
	<-done
	p.untrack(c, b)
}

func (p *rrProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *rrProxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
	}
}

// Close stops accepting, ends every paired connection and waits for the
// copies to finish.
func (p *rrProxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
