package invoke

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/boundary"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/schema"
)

// maxAuditArguments bounds the arguments a call's audit event keeps: what
// answers "what did the agent ask for" without making the trail a copy of
// every payload.
const maxAuditArguments = 4 << 10

// auditArguments answers the form of a call's validated arguments its
// audit event keeps: credentials redacted by the boundary's rule (a
// credential's name or shape), every value the input schema marks
// x-sensitive masked where it is and hidden wherever it was copied to,
// then bounded to maxAuditArguments (an argument too large becomes the
// boundary's marker). The arguments themselves are never stored.
func auditArguments(t *registry.Tool, args any) json.RawMessage {
	v := boundary.Redact(args)
	if sens := t.Input().Sensitive(); len(sens) > 0 {
		values := schema.SensitiveValues(args, sens)
		v = boundary.Hide(schema.Mask(v, sens, boundary.Redacted), values)
	}
	v, _ = boundary.Bound(v, maxAuditArguments)
	return boundary.Encode(nil, v)
}

// auditInput fills, once, what the call's event says of its arguments:
// the classified fields they carried and, for a call that may change the
// world or carried a classified field, their redacted form. A read of a
// tool that classifies nothing keeps only what it always kept, and
// allocates nothing here: the trail of reads is the hot path's.
func (c *call) auditInput() {
	if c.argsAudited || c.tool == nil || c.args == nil {
		return
	}
	c.argsAudited = true
	paths, classes := c.tool.Input().Touched(c.args)
	c.audit.PIIFields, c.audit.Classifications = paths, classes
	if c.tool.Def.Writes() || len(paths) > 0 {
		c.audit.Arguments = auditArguments(c.tool, c.args)
	}
}

// outputHash answers the digest of a rendered result, "sha256:<hex>": the
// proof of what the caller was answered, without keeping it.
func outputHash(rendered []byte) string {
	sum := sha256.Sum256(rendered)
	var b [len("sha256:") + 2*sha256.Size]byte
	copy(b[:], "sha256:")
	hex.Encode(b[len("sha256:"):], sum[:])
	return string(b[:])
}

// maxPooledRender bounds the rendering buffers kept for output hashes: a
// rare large result is not held for the life of the process.
const maxPooledRender = 64 << 10

// renders are the buffers a result is rendered into to be hashed.
var renders = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// resultHash answers outputHash of r's rendering (boundary.Render's
// bytes), rendered into a pooled buffer: a read's event costs its hash,
// not a copy of its result.
func resultHash(r toolplane.Result) string {
	bp := renders.Get().(*[]byte)
	b := boundary.AppendRender((*bp)[:0], r)
	h := outputHash(b)
	if cap(b) <= maxPooledRender {
		*bp = b
		renders.Put(bp)
	}
	return h
}

// auditSpan names the call's span on its event (hex trace and span ids),
// where the trail and a trace meet; nothing when no tracer records it.
func (c *call) auditSpan() {
	sc := c.span.SpanContext()
	if !sc.IsValid() {
		return
	}
	c.audit.TraceID, c.audit.SpanID = sc.TraceID().String(), sc.SpanID().String()
}

// approvedBy records on the call's event the approval that let it
// through and the person who decided it (the last of several, when a
// rule asked for more than one).
func (c *call) approvedBy(a *toolplane.Approval) {
	c.audit.ApprovalID = a.ID
	if a.Status == toolplane.ApprovalApproved {
		c.audit.ApproverID = a.ResolvedBy
	}
}
