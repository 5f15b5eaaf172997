package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/httperr"
)

// DefaultMaxBatch is how many calls a batch may carry when
// Server.MaxBatch is not set.
const DefaultMaxBatch = 50

// batchRequest is the body of a batch: its calls, each decoded on its own
// (batchCall) so that a malformed one is named by its index.
type batchRequest struct {
	Calls []json.RawMessage `json:"calls"`
}

// batchCall is one call of a batch: the tool's name beside what the body
// of a single invocation holds, read by the same rules.
type batchCall struct {
	Tool string `json:"tool"`
	invokeRequest
}

// batchResult is the answer to one call of a batch: the status and body
// the call alone would have been answered with, and the seconds its
// Retry-After would have said.
type batchResult struct {
	Status     int `json:"status"`
	RetryAfter int `json:"retry_after,omitempty"`
	Body       any `json:"body"`
}

// batchError refuses a batch whole, before any of its calls ran: Field
// names the call at fault by its index (calls[2].run_id), or calls itself.
type batchError struct {
	Field, Message string
}

func (e *batchError) Error() string { return e.Message }

// maxBatch answers how many calls a batch may carry.
func (s *Server) maxBatch() int {
	if s.MaxBatch > 0 {
		return s.MaxBatch
	}
	return DefaultMaxBatch
}

// invokeBatch runs a batch of calls, one after the other in their order,
// each through the door exactly as a single invocation is: decided,
// journalled and answered on its own, so a call refused or failed does
// not stop the one beside it. The batch is answered 200 with one result
// per call, in order.
//
// Calls run sequentially rather than concurrently: the results keep the
// order of the calls without a second bound to configure, two calls of a
// batch under the same key replay (the second answers the first's result)
// instead of racing for the key as in_flight, and a batch holds no more of
// the node than one request does.
//
// The whole batch is read and checked before its first call runs: one too
// many calls, a body past the bound, or one malformed call refuses the
// batch whole, 400, and nothing of it reaches the journal, the policy, a
// claim, a handler, a preview or the meter. The request authenticates
// once and spends the key's budget once; each further call spends it as a
// request would (door.Door.Spend), and a call past it is answered
// rate_limited in its place while the batch goes on.
func (s *Server) invokeBatch(w http.ResponseWriter, r *http.Request, c caller) {
	if err := door.CallsTools(c.cred); err != nil {
		// Before the body is read, as for a single call.
		httperr.Send(w, r, httperr.Denied, err.Error(), "")
		return
	}
	// Every call's deadline counts from here, not from when its turn
	// comes: a batch's calls run one after the other, and the time the
	// caller gave is the request's.
	read := s.Door.Clock()
	who := door.Caller{Credential: c.cred, At: c.at}
	calls, err := s.decodeBatch(r, who, read)
	if err != nil {
		var bad *batchError
		if errors.As(err, &bad) {
			httperr.Send(w, r, httperr.InvalidRequest, bad.Message, bad.Field)
			return
		}
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "")
		return
	}
	// A call outside an OAuth token's consent refuses the whole batch
	// before any call runs, naming every scope it needs at once.
	tools := make([]string, len(calls))
	for i, call := range calls {
		tools[i] = call.Tool
	}
	if s.outOfScope(w, r, c, tools...) {
		return
	}
	// Every envelope of the batch names the one request it came in.
	requestID := httperr.RequestID(r)
	results := make([]batchResult, len(calls))
	for i, call := range calls {
		if r.Context().Err() != nil {
			// The caller is gone: nobody reads the rest of the answer, and
			// the calls not yet made are not made, nor charged to the key,
			// nor audited one by one as ended before they began.
			return
		}
		at := who
		if i > 0 {
			var retryAfter int
			if at, retryAfter, err = s.spend(r, w.Header(), who); err != nil {
				// Answered as the request itself would have been.
				results[i] = batchResult{Status: httperr.RateLimited.Status(), RetryAfter: retryAfter,
					Body: httperr.Problem{Code: httperr.RateLimited, Message: err.Error()}.Envelope(requestID)}
				continue
			}
		}
		ans := s.answerOf(r, requestID, s.Door.Call(r.Context(), at, call))
		results[i] = batchResult{Status: ans.status, RetryAfter: ans.retryAfter, Body: ans.payload()}
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": results})
}

// decodeBatch reads r's batch into the calls to make as who, each timed
// from read (when the door read r) under r's Request-Timeout, refusing it
// whole (a *batchError, or the body's own error) when it carries no call,
// more than maxBatch, or a call that is malformed or names an identifier
// past its bound.
func (s *Server) decodeBatch(r *http.Request, who door.Caller, read time.Time) ([]door.Call, error) {
	// The Request-Timeout header bounds every call of the batch, each
	// also by its own timeout_ms, all counted from read.
	header, err := requestTimeout(r)
	if err != nil {
		return nil, &batchError{Field: "Request-Timeout", Message: err.Error()}
	}
	var body batchRequest
	if err := decodeBody(r, &body); err != nil {
		return nil, err
	}
	switch n := len(body.Calls); {
	case n == 0:
		return nil, &batchError{Field: "calls", Message: "a batch carries at least one call"}
	case n > s.maxBatch():
		return nil, &batchError{Field: "calls", Message: fmt.Sprintf("a batch carries at most %d calls; this one carries %d", s.maxBatch(), n)}
	}
	calls := make([]door.Call, len(body.Calls))
	for i, raw := range body.Calls {
		at := "calls[" + strconv.Itoa(i) + "]"
		var bc batchCall
		if err := bodyDecoders.DecodeOnly(raw, &bc); err != nil {
			return nil, &batchError{Field: at, Message: fmt.Sprintf("call %d is not valid: %v", i, err)}
		}
		if bc.Tool == "" {
			return nil, &batchError{Field: at + ".tool", Message: fmt.Sprintf("call %d names no tool", i)}
		}
		if err := bc.checkMode(); err != nil {
			return nil, &batchError{Field: at + ".mode", Message: fmt.Sprintf("call %d: %v", i, err)}
		}
		calls[i] = bc.call(bc.Tool)
		if field, err := bc.traffic(&calls[i], header, read); err != nil {
			return nil, &batchError{Field: at + "." + field, Message: fmt.Sprintf("call %d: %v", i, err)}
		}
		// The invoker checks these bounds again at each call; checked here
		// too so that a call past one refuses the batch before any runs.
		var tooLong *toolplane.TooLongError
		if err := s.Door.Invocation(who.Credential, calls[i]).Check(bc.Tool); errors.As(err, &tooLong) {
			return nil, &batchError{Field: at + "." + tooLong.Field, Message: fmt.Sprintf("call %d: %v", i, tooLong)}
		}
	}
	return calls, nil
}

// spend charges one more call of the batch to who's key, answering the
// caller to make it as, or, past the budget, the door's refusal and the
// seconds its Retry-After would have said. The rate limit's headers in h
// say the budget left after it.
func (s *Server) spend(r *http.Request, h http.Header, who door.Caller) (door.Caller, int, error) {
	// Retry-After belongs to the call refused, not to the batch's answer.
	scratch := http.Header{}
	at, err := s.Door.Spend(r.Context(), who, scratch)
	retryAfter, _ := strconv.Atoi(scratch.Get("Retry-After"))
	scratch.Del("Retry-After")
	for k, v := range scratch {
		h[k] = v
	}
	if err != nil {
		return at, retryAfter, err
	}
	return at, 0, nil
}
