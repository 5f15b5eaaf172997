package httpruntime

import (
	"bytes"
	"context"
	"mime"
	"net/http"
	"slices"

	"github.com/toolplane/toolplane/handler"
)

// passer passes a downstream answer that streams (server-sent events, or
// a chunked body of lines such as NDJSON) through to the call's stream,
// piece by piece as it is read: each event's data, or each line, decoded
// when it is JSON and kept as text when not, stripped of the call's
// secret values, and emitted (handler.Emit), where the invoker bounds,
// redacts and labels it untrusted as it does the runtime's answers. The
// answer itself is read whole as before: the pieces are a preview of it,
// never a replacement.
type passer struct {
	ctx context.Context
	s   *scrubber
	// sse: the body is server-sent events; else lines.
	sse bool
	// pending is what was read past the last line break.
	pending []byte
	// data are the data lines of the event being read, joined.
	data    []byte
	hasData bool
	// stopped: the stream takes no more (its bound cut it, or the call
	// ended); the body is still read for the answer.
	stopped bool
}

// passThrough answers the passer of resp's body when the call is
// streamed and resp is a 2xx answer that streams; nil otherwise.
func passThrough(ctx context.Context, resp *http.Response, s *scrubber) *passer {
	if !handler.Streaming(ctx) || resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil
	}
	media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	sse := media == "text/event-stream"
	if !sse && !slices.Contains(resp.TransferEncoding, "chunked") {
		return nil
	}
	return &passer{ctx: ctx, s: s, sse: sse}
}

// Write takes what the body's reader read.
func (p *passer) Write(b []byte) (int, error) {
	p.pending = append(p.pending, b...)
	rest := p.pending
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			break
		}
		p.line(bytes.TrimSuffix(rest[:i], []byte("\r")))
		rest = rest[i+1:]
	}
	p.pending = append(p.pending[:0], rest...)
	return len(b), nil
}

// end passes the last line of a body of lines that did not end with a
// line break. An event not ended by a blank line is dropped, as a client
// of server-sent events drops it.
func (p *passer) end() {
	if !p.sse && len(p.pending) > 0 {
		p.line(bytes.TrimSuffix(p.pending, []byte("\r")))
	}
	p.pending = nil
}

// line takes one line of the body.
func (p *passer) line(l []byte) {
	if !p.sse {
		if len(bytes.TrimSpace(l)) > 0 {
			p.emit(l)
		}
		return
	}
	switch {
	case len(l) == 0:
		if p.hasData {
			p.emit(p.data)
		}
		p.data, p.hasData = p.data[:0], false
	case l[0] == ':':
		// A comment: a downstream's heartbeat.
	default:
		field, value, _ := bytes.Cut(l, []byte(":"))
		if string(field) != "data" {
			return // event, id, retry: the data is what the caller reads
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if p.hasData {
			p.data = append(p.data, '\n')
		}
		p.data = append(p.data, value...)
		p.hasData = true
	}
}

// emit passes one piece: its JSON decoded, or its text.
func (p *passer) emit(piece []byte) {
	if p.stopped {
		return
	}
	var v any
	if decoded, ok := decode(bytes.TrimSpace(piece)); ok {
		v = decoded
	} else {
		v = string(piece)
	}
	if err := handler.Emit(p.ctx, p.s.value(v)); err != nil {
		p.stopped = true
	}
}
