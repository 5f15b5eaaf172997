package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names of a signed request.
const (
	HeaderTimestamp = "X-Toolplane-Timestamp"
	HeaderSignature = "X-Toolplane-Signature"
	HeaderEvent     = "X-Toolplane-Event"
	HeaderDelivery  = "X-Toolplane-Delivery"
)

// DefaultTolerance is how far a request's timestamp may be from the
// receiver's clock, either way, when a Verifier is given none.
const DefaultTolerance = 5 * time.Minute

// Bounds of what a receiver parses: a signature header is a handful of
// entries, and anything longer is refused before any MAC is computed.
const (
	maxSignatureHeader = 4096
	maxEntries         = 16
	maxDelivery        = 256
	macSize            = sha256.Size
)

// The checks a request fails, one sentinel each, so a receiver (and the
// CLI) can say which.
var (
	// ErrMalformed: a header is missing or not in the scheme's form.
	ErrMalformed = errors.New("webhook malformed")
	// ErrStale: the timestamp is further from now than the tolerance.
	ErrStale = errors.New("webhook timestamp outside the tolerance window")
	// ErrSignature: no signature matches any secret.
	ErrSignature = errors.New("webhook signature does not match")
	// ErrReplay: the delivery, or the very signed message, was accepted
	// already within the window.
	ErrReplay = errors.New("webhook delivery already seen")
)

// CheckName answers the name of the check err failed (malformed, stale,
// signature, replay), or "" when err is none of them.
func CheckName(err error) string {
	switch {
	case errors.Is(err, ErrMalformed):
		return "malformed"
	case errors.Is(err, ErrStale):
		return "stale"
	case errors.Is(err, ErrSignature):
		return "signature"
	case errors.Is(err, ErrReplay):
		return "replay"
	}
	return ""
}

func mac(key []byte, ts int64, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(strconv.AppendInt(nil, ts, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Sign answers the one v1 entry ("v1=<hex>") of body sent at ts under key.
func Sign(key []byte, ts int64, body []byte) string {
	return "v1=" + hex.EncodeToString(mac(key, ts, body))
}

// Signature answers the X-Toolplane-Signature value of body sent at ts:
// one v1 entry per key, in the order given, comma-separated. With one key
// it is Sign's answer.
func Signature(keys [][]byte, ts int64, body []byte) string {
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, Sign(k, ts, body))
	}
	return strings.Join(parts, ",")
}

// Headers answers the headers of body signed at at under keys (the
// current secret first) for delivery: timestamp, signature and delivery.
// The caller adds X-Toolplane-Event when it has one.
func Headers(keys [][]byte, delivery string, body []byte, at time.Time) http.Header {
	ts := at.Unix()
	h := http.Header{}
	h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderSignature, Signature(keys, ts, body))
	if delivery != "" {
		h.Set(HeaderDelivery, delivery)
	}
	return h
}

// ParseTimestamp answers the Unix seconds of a timestamp header: decimal
// digits only (no sign, no space), at most 18 of them.
func ParseTimestamp(s string) (int64, error) {
	if s == "" || len(s) > 18 {
		return 0, fmt.Errorf("%w: %s is not Unix seconds", ErrMalformed, HeaderTimestamp)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%w: %s is not Unix seconds", ErrMalformed, HeaderTimestamp)
		}
	}
	ts, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s is not Unix seconds", ErrMalformed, HeaderTimestamp)
	}
	return ts, nil
}

// ParseSignature answers the v1 MACs of a signature header: entries
// separated by commas (spaces around them allowed), each scheme=value.
// Entries of another scheme are skipped; a v1 value must be 64 hex
// digits. A header with no v1 entry, an entry without "=", an empty
// entry, more than 16 entries or more than 4 KiB is malformed.
func ParseSignature(s string) ([][]byte, error) {
	bad := func(why string) error { return fmt.Errorf("%w: %s %s", ErrMalformed, HeaderSignature, why) }
	if len(s) > maxSignatureHeader {
		return nil, bad("is too long")
	}
	entries := strings.Split(s, ",")
	if len(entries) > maxEntries {
		return nil, bad("has too many entries")
	}
	var macs [][]byte
	for _, e := range entries {
		e = strings.TrimSpace(e)
		scheme, value, ok := strings.Cut(e, "=")
		if !ok || scheme == "" {
			return nil, bad("holds an entry that is not scheme=value")
		}
		if scheme != "v1" {
			continue
		}
		m, err := hex.DecodeString(value)
		if err != nil || len(m) != macSize {
			return nil, bad("holds a v1 entry that is not 64 hex digits")
		}
		macs = append(macs, m)
	}
	if len(macs) == 0 {
		return nil, bad("holds no v1 entry")
	}
	return macs, nil
}

// Check is the stateless part of a receiver's check: timestamp and
// signature headers well formed, the timestamp within tolerance of now
// either way, and some v1 entry the MAC of body under some key. It
// remembers nothing, so it cannot refuse a replay within the window; a
// Verifier does. Keys are tried in order, every one compared in constant
// time.
func Check(keys [][]byte, timestamp, signature string, body []byte, now time.Time, tolerance time.Duration) error {
	ts, err := ParseTimestamp(timestamp)
	if err != nil {
		return err
	}
	macs, err := ParseSignature(signature)
	if err != nil {
		return err
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	switch d := now.Sub(time.Unix(ts, 0)); {
	case d > tolerance:
		return fmt.Errorf("%w: the timestamp is %s old, past the tolerance of %s", ErrStale, d.Round(time.Second), tolerance)
	case d < -tolerance:
		return fmt.Errorf("%w: the timestamp is %s ahead of this clock, past the tolerance of %s", ErrStale, (-d).Round(time.Second), tolerance)
	}
	ok := false
	for _, k := range keys {
		want := mac(k, ts, body)
		for _, m := range macs {
			// No early exit: the time taken says nothing of which
			// entry or key matched.
			if hmac.Equal(m, want) {
				ok = true
			}
		}
	}
	if !ok {
		return fmt.Errorf("%w: no v1 entry matches a secret", ErrSignature)
	}
	return nil
}
