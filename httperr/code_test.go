package httperr_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/catalog"
	"github.com/toolplane/toolplane/cursor"
	"github.com/toolplane/toolplane/httperr"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/journal"
	"github.com/toolplane/toolplane/upstream"
)

// Every door code has one status, an error status, and the codes the
// doors share with the stable codes models read are spelt as those are.
// Each status's own code is the one JSON names a plain-text answer of it,
// as before the table: the table changed where the pairs are written, not
// what a client reads.
func TestEveryCodeHasItsStatus(t *testing.T) {
	t.Parallel()
	want := map[httperr.Code]int{
		"invalid_request": 400, "incompatible": 400, "unauthenticated": 401, "denied": 403, "not_found": 404,
		"method_not_allowed": 405, "conflict": 409, "invalid_transition": 409, "in_flight": 409, "too_large": 413,
		"rate_limited": 429, "internal_error": 500, "unavailable": 503,
	}
	codes := httperr.Codes()
	seen := map[httperr.Code]bool{}
	for _, c := range codes {
		if seen[c] {
			t.Errorf("%s is in the table twice", c)
		}
		seen[c] = true
		if s, ok := want[c]; !ok || c.Status() != s {
			t.Errorf("%s: status %d, want %d (listed: %v)", c, c.Status(), s, ok)
		}
	}
	if len(codes) != len(want) {
		t.Errorf("the table has %d codes, want %d", len(codes), len(want))
	}
	// The stable codes a door answers in its envelope mean there what they
	// mean in a result.
	for _, c := range []toolplane.Code{toolplane.CodeDenied, toolplane.CodeNotFound, toolplane.CodeConflict, toolplane.CodeUnavailable, toolplane.CodeInternalError} {
		if !c.Valid() || !seen[httperr.Code(c)] {
			t.Errorf("stable code %s has no status in the table", c)
		}
	}
	for _, c := range toolplane.Codes {
		if seen[httperr.Code(c)] && httperr.Code(c).Status() < 400 {
			t.Errorf("stable code %s answers %d", c, httperr.Code(c).Status())
		}
	}
	if s := httperr.Code("no_such_code").Status(); s != http.StatusInternalServerError {
		t.Errorf("a code outside the table answers %d, want 500", s)
	}
	for status, code := range map[int]httperr.Code{
		400: "invalid_request", 401: "unauthenticated", 403: "denied", 404: "not_found", 405: "method_not_allowed",
		409: "conflict", 413: "too_large", 429: "rate_limited", 500: "internal_error", 502: "internal_error",
		503: "unavailable", 504: "internal_error", 408: "request_timeout", 406: "not_acceptable",
	} {
		if got := httperr.CodeFor(status); got != code {
			t.Errorf("CodeFor(%d) = %s, want %s", status, got, code)
		}
	}
}

// kinds names the kinds Classify tells apart, in its order of precedence.
var kinds = []struct {
	err   error
	code  httperr.Code
	field string
}{
	{toolplane.ErrUnauthenticated, httperr.Unauthenticated, ""},
	{toolplane.ErrForbidden, httperr.Denied, ""},
	{&toolplane.TooLongError{Field: "run_id", Len: 300, Max: 256}, httperr.InvalidRequest, "run_id"},
	{toolplane.ErrBadCursor, httperr.InvalidRequest, "cursor"},
	{toolplane.ErrInvalid, httperr.InvalidRequest, ""},
	{toolplane.ErrTransition, httperr.InvalidTransition, ""},
	{toolplane.ErrConflict, httperr.Conflict, ""},
	{toolplane.ErrNotFound, httperr.NotFound, ""},
}

// Each kind of the vocabulary, and each package's refinement of one,
// answers its code wherever it is wrapped; an error of no kind is no
// refusal.
func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		err   error
		code  httperr.Code
		field string
		msg   string
	}{
		{"forbidden", fmt.Errorf("%w: publishing needs tool_owner", toolplane.ErrForbidden), httperr.Denied, "", "forbidden: publishing needs tool_owner"},
		{"invalid", fmt.Errorf("%w: a deny says why", toolplane.ErrInvalid), httperr.InvalidRequest, "", "invalid: a deny says why"},
		{"too long, wrapped as invalid", fmt.Errorf("%w: %w", toolplane.ErrInvalid, toolplane.CheckLen("agent_id", "abcd", 2)), httperr.InvalidRequest, "agent_id", "agent_id is 4 bytes long; at most 2 are accepted"},
		{"a malformed cursor", fmt.Errorf("list: %w", fmt.Errorf("%w: not base64url", cursor.ErrMalformed)), httperr.InvalidRequest, "cursor", "the cursor is not valid"},
		{"not found", fmt.Errorf("grant g-1: %w", toolplane.ErrNotFound), httperr.NotFound, "", "grant g-1: not found"},
		{"exists", fmt.Errorf("insert: %w", toolplane.ErrExists), httperr.Conflict, "", "insert: already exists"},
		{"a transition", fmt.Errorf("%w: x is active", catalog.ErrTransition), httperr.InvalidTransition, "", "transition not allowed: x is active"},
		{"a transition, wrapped again", fmt.Errorf("retire x 1.0.0: %w", fmt.Errorf("%w: x is active", catalog.ErrTransition)), httperr.InvalidTransition, "", "retire x 1.0.0: transition not allowed: x is active"},
		{"a transition also invalid", fmt.Errorf("%w: %w", toolplane.ErrInvalid, catalog.ErrTransition), httperr.InvalidRequest, "", "invalid: transition not allowed"},
		{"forbidden before a transition", fmt.Errorf("%w: %w", catalog.ErrTransition, toolplane.ErrForbidden), httperr.Denied, "", "transition not allowed: forbidden"},
		{"unauthenticated", fmt.Errorf("token not valid: %w", toolplane.ErrUnauthenticated), httperr.Unauthenticated, "", "token not valid: not authenticated"},
		{"a claim not uncertain", fmt.Errorf("settle k: %w (it is completed)", journal.ErrNotUncertain), httperr.Conflict, "", "settle k: claim is not an uncertain action (it is completed)"},
		{"a bad reconciliation", fmt.Errorf("%w: no tool x", invoke.ErrBadReconciliation), httperr.InvalidRequest, "", "invalid reconciliation: no tool x"},
		{"an upstream setting", fmt.Errorf("%w: effect", upstream.ErrConfig), httperr.InvalidRequest, "", "upstream configuration: effect"},
		{"a service's refusal, in its words", fmt.Errorf("resolve approval ap_1: %w", toolplane.Refuse(&toolplane.Credential{Kind: toolplane.CredentialPerson}, approval.ErrNotAuthorized, "answering approvals needs approver")), httperr.Denied, "", "answering approvals needs approver"},
		{"a refusal naming no sentinel", &toolplane.DeniedError{Why: "reading the audit needs auditor"}, httperr.Denied, "", "reading the audit needs auditor"},
		{"forbidden before invalid", fmt.Errorf("%w: %w", toolplane.ErrInvalid, toolplane.ErrForbidden), httperr.Denied, "", "invalid: forbidden"},
	}
	for _, tt := range tests {
		p, ok := httperr.Classify(tt.err)
		if !ok || p.Code != tt.code || p.Field != tt.field || p.Message != tt.msg {
			t.Errorf("%s: Classify(%v) = %+v, %v; want %s at %q saying %q", tt.name, tt.err, p, ok, tt.code, tt.field, tt.msg)
		}
	}
	for _, err := range []error{nil, errors.New("sql: database is closed"), fmt.Errorf("list: %w", errors.New("connection refused"))} {
		if p, ok := httperr.Classify(err); ok {
			t.Errorf("Classify(%v) = %+v; want no refusal", err, p)
		}
	}
}

// An approval refused for its state (not pending, expired, arguments
// tampered with, its tool changed) is a conflict, and a caller who may not
// answer it is denied: Classify answers each as the REST API's resolve and
// the console answered it when each mapped the approval errors itself, at
// the same status, code and message, wrapped as approval.Service.Resolve
// and invoke's recheck wrap it.
func TestClassifyApprovalRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		err    error
		code   httperr.Code
		status int
		msg    string
	}{
		{"not pending", fmt.Errorf("resolve approval ap_1: %w (it is approved)", approval.ErrNotPending), httperr.Conflict, http.StatusConflict, "resolve approval ap_1: approval is not pending (it is approved)"},
		{"answered concurrently", fmt.Errorf("resolve approval ap_1: %w (resolved concurrently)", approval.ErrNotPending), httperr.Conflict, http.StatusConflict, "resolve approval ap_1: approval is not pending (resolved concurrently)"},
		{"expired", fmt.Errorf("resolve approval ap_1: %w at 2026-01-02T03:04:05Z", approval.ErrExpired), httperr.Conflict, http.StatusConflict, "resolve approval ap_1: approval expired at 2026-01-02T03:04:05Z"},
		{"tampered", fmt.Errorf("resolve approval ap_1: %w", approval.ErrTampered), httperr.Conflict, http.StatusConflict, "resolve approval ap_1: approval arguments do not match their hash"},
		{"tampered, unreadable", fmt.Errorf("resolve approval ap_1: %w", fmt.Errorf("%w: %v", approval.ErrTampered, errors.New("unexpected end of JSON input"))), httperr.Conflict, http.StatusConflict, "resolve approval ap_1: approval arguments do not match their hash: unexpected end of JSON input"},
		{"stale", fmt.Errorf("resolve approval ap_1: %w", fmt.Errorf("%w: refund is no longer registered", approval.ErrStale)), httperr.Conflict, http.StatusConflict, "resolve approval ap_1: the tool changed since the approval was filed: refund is no longer registered"},
		{"not an approver", fmt.Errorf("resolve approval ap_1: %w", approval.ErrNotAuthorized), httperr.Denied, http.StatusForbidden, "resolve approval ap_1: not an authorised approver"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, ok := httperr.Classify(tt.err)
			if !ok || p.Code != tt.code || p.Code.Status() != tt.status || p.Message != tt.msg || p.Field != "" {
				t.Errorf("Classify(%v) = %+v, %v (status %d); want %s (%d) saying %q", tt.err, p, ok, p.Code.Status(), tt.code, tt.status, tt.msg)
			}
		})
	}
}

// Fail answers a refusal with its code's status, and anything else as a
// logged 500 that names none of the error's text: a store outage is never
// answered as the caller's mistake.
func TestFail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err    error
		status int
		code   string
		logged bool
	}{
		{fmt.Errorf("%w: no", toolplane.ErrForbidden), 403, "denied", false},
		{fmt.Errorf("x: %w", cursor.ErrMalformed), 400, "invalid_request", false},
		{fmt.Errorf("x: %w", toolplane.ErrExists), 409, "conflict", false},
		{fmt.Errorf("list versions: %w", errors.New("sql: database is closed")), 500, "internal_error", true},
	}
	for _, tt := range tests {
		var logs bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logs, nil))
		rec := httptest.NewRecorder()
		httperr.Fail(rec, httptest.NewRequest(http.MethodGet, "/v1/things", nil), log, tt.err)
		var body httperr.Body
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("%v: %s", err, rec.Body)
		}
		if rec.Code != tt.status || body.Error.Code != tt.code || body.Error.Retryable != httperr.Retryable(tt.status) {
			t.Errorf("Fail(%v) = %d %+v; want %d %s", tt.err, rec.Code, body.Error, tt.status, tt.code)
		}
		if logged := strings.Contains(logs.String(), "database is closed"); logged != tt.logged {
			t.Errorf("Fail(%v) logged %q; want logged: %v", tt.err, logs.String(), tt.logged)
		}
		if tt.logged && strings.Contains(body.Error.Message, "sql") {
			t.Errorf("Fail(%v) told the caller %q", tt.err, body.Error.Message)
		}
	}
}

// FuzzClassify builds an error from any mix of the kinds, errors of no
// kind and wrappings (%w, joined, doubly wrapped): Classify answers the
// first kind present in its order of precedence, at that kind's code and
// field, and "no refusal" exactly when no kind is present; its code always
// has a status of the table.
func FuzzClassify(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte{1, 4, 7})
	f.Add([]byte{6, 5, 3, 2, 9})
	f.Add([]byte{8, 8, 7})
	f.Add([]byte{2, 0, 200, 13})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 16 {
			b = b[:16]
		}
		var errs []error
		first := len(kinds)
		for i, c := range b {
			var e error
			if k := int(c) % (len(kinds) + 2); k < len(kinds) {
				e, first = kinds[k].err, min(first, k)
			} else {
				e = fmt.Errorf("fault %d", i)
			}
			switch c / 32 % 3 {
			case 1:
				e = fmt.Errorf("step %d: %w", i, e)
			case 2:
				e = fmt.Errorf("outer: %w", fmt.Errorf("inner %d: %w", i, e))
			}
			errs = append(errs, e)
		}
		var err error
		switch len(errs) {
		case 0:
		case 1:
			err = errs[0]
		default:
			err = errors.Join(errs...)
		}
		p, ok := httperr.Classify(err)
		if first == len(kinds) {
			if ok {
				t.Fatalf("Classify(%v) = %+v; want no refusal", err, p)
			}
			return
		}
		k := kinds[first]
		if !ok || p.Code != k.code || p.Field != k.field || p.Message == "" {
			t.Fatalf("Classify(%v) = %+v, %v; want %s at %q", err, p, ok, k.code, k.field)
		}
		if s := p.Code.Status(); s < 400 || s >= 500 {
			t.Fatalf("a refusal answers %d", s)
		}
	})
}
