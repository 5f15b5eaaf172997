package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"golang.org/x/oauth2"

	"github.com/toolplane/toolplane"
)

// ErrConfig: a Config lacks what the request needs (an endpoint, the
// client id, the HTTP client). It is the connection's settings at fault.
var ErrConfig = toolplane.Refine(toolplane.ErrInvalid, "oauth client configuration incomplete")

// ErrNoRevocation: the provider has no revocation endpoint, so a token can
// only be forgotten, not revoked.
var ErrNoRevocation = errors.New("oauth provider has no revocation endpoint")

// GrantError is a provider's definite refusal of the grant itself
// (invalid_grant): the refresh token was revoked or expired, the code was
// spent, expired or does not match its PKCE verifier. Repeating the
// request fails again; the person must consent again, so a connection
// meeting it needs reauthorization (connection_expired).
type GrantError struct {
	// Op is the request refused: exchange, refresh or client_credentials.
	Op string
	// Description is the provider's error_description, cleared of every
	// value the request sent.
	Description string
}

func (e *GrantError) Error() string {
	return withDescription("oauth "+e.Op+": the provider refused the grant (invalid_grant)", e.Description)
}

// ProviderError is any other refusal by the provider: the client is not
// known or its secret is wrong (invalid_client), a scope or the grant type
// is not allowed, the request is malformed. It says the connection's
// settings are wrong; repeating the request fails again.
type ProviderError struct {
	Op string
	// Status is the HTTP status of the answer.
	Status int
	// Code is the RFC 6749 error code; empty when the answer had none.
	Code string
	// Description is the provider's error_description, cleared of every
	// value the request sent.
	Description string
}

func (e *ProviderError) Error() string {
	s := fmt.Sprintf("oauth %s: the provider refused the request (status %d", e.Op, e.Status)
	if e.Code != "" {
		s += ", " + e.Code
	}
	return withDescription(s+")", e.Description)
}

// TransientError is a failure that says nothing about the grant: the
// provider could not be reached, failed (5xx, server_error,
// temporarily_unavailable), was rate limited (429) or answered something
// unreadable. The same request may succeed later; the grant is kept.
type TransientError struct {
	Op string
	// Status is the HTTP status of the answer; 0 when none came.
	Status int
	// Code is the RFC 6749 error code, when the answer had one.
	Code string
	// RetryAfter is the provider's Retry-After, when it sent one.
	RetryAfter time.Duration
	msg        string
	// cause is a transport or context error, kept so errors.Is sees
	// context.DeadlineExceeded; never an error holding a provider's body.
	cause error
}

func (e *TransientError) Error() string { return "oauth " + e.Op + ": " + e.msg }

// Unwrap answers the transport or context error behind the failure, if
// any.
func (e *TransientError) Unwrap() error { return e.cause }

// Retryable reports whether err is a failure the same request may
// overcome later (a *TransientError).
func Retryable(err error) bool {
	var t *TransientError
	return errors.As(err, &t)
}

// classify turns what x/oauth2 or the transport answered into the
// package's errors, removing from every text the values sent.
func classify(op string, err error, sent ...string) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		status := 0
		var header http.Header
		if re.Response != nil {
			status, header = re.Response.StatusCode, re.Response.Header
		}
		return refusal(op, status, header, re.ErrorCode, re.ErrorDescription, sent)
	}
	return transportError(op, err, sent)
}

// transportError is a failure without a provider's verdict.
func transportError(op string, err error, sent []string) error {
	t := &TransientError{Op: op}
	var ue *url.Error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		t.cause = err
		t.msg = "the request was abandoned: " + redact(err.Error(), sent)
	case errors.As(err, &ue):
		t.cause = err
		t.msg = "the provider could not be reached: " + redact(err.Error(), sent)
	default:
		// A parse failure of a success answer: its text may quote the
		// answer, so only the fact is kept.
		t.msg = "the provider's answer could not be read"
	}
	return t
}

// refusal classifies an answer carrying an error: by its RFC 6749 code
// first, then by its status.
func refusal(op string, status int, header http.Header, code, description string, sent []string) error {
	code = errorCode(redact(code, sent))
	description = clean(redact(description, sent))
	switch {
	case code == "invalid_grant":
		return &GrantError{Op: op, Description: description}
	case code == "server_error", code == "temporarily_unavailable",
		status >= 500, status == http.StatusTooManyRequests:
		msg := fmt.Sprintf("the provider failed (status %d", status)
		if code != "" {
			msg += ", " + code
		}
		return &TransientError{Op: op, Status: status, Code: code,
			RetryAfter: retryAfter(header), msg: withDescription(msg+")", description)}
	default:
		return &ProviderError{Op: op, Status: status, Code: code, Description: description}
	}
}

// retryAfter reads a Retry-After header given in seconds.
func retryAfter(h http.Header) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After")))
	if err != nil || n < 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}

// redact replaces every value sent, in clear or URL-encoded, with the
// placeholder a secret prints as.
func redact(s string, sent []string) string {
	for _, v := range sent {
		if v == "" {
			continue
		}
		for _, form := range []string{v, url.QueryEscape(v), url.PathEscape(v)} {
			s = strings.ReplaceAll(s, form, "[secret]")
		}
	}
	return s
}

// errorCode keeps an RFC 6749 error code only when it is one: a short run
// of the characters the grammar allows (section 5.2, no quote or
// backslash).
func errorCode(s string) string {
	if len(s) > 64 {
		return ""
	}
	for _, r := range s {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return ""
		}
	}
	return s
}

// maxDescription bounds the provider's text kept in an error.
const maxDescription = 200

// clean makes a provider's description one printable line of bounded
// length.
func clean(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return ' '
	}, s)
	s = strings.TrimSpace(s)
	if r := []rune(s); len(r) > maxDescription {
		s = string(r[:maxDescription]) + "…"
	}
	return s
}

func withDescription(s, description string) string {
	if description == "" {
		return s
	}
	return s + ": " + description
}
