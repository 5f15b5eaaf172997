// Package webhook is the one way toolplane signs the HTTP requests it
// sends to a receiver (a notification channel's webhook, an async call's
// callback) and the way a receiver checks them.
//
// # The scheme
//
// A signed request carries, beside its raw body:
//
//	X-Toolplane-Timestamp: 1767225600                 (Unix seconds)
//	X-Toolplane-Signature: v1=<hex>[,v1=<hex>...]     (HMAC-SHA256 over "<timestamp>.<body>")
//	X-Toolplane-Delivery:  <id>                       (the same on every retry of one delivery)
//
// Each v1 entry is HMAC-SHA256, under one secret, of the timestamp's
// decimal digits, a dot and the body bytes exactly as sent. While a
// secret is being rotated the sender signs with the new one and the old
// one, so a receiver holding either accepts the request; a receiver
// accepts when any entry matches any secret it holds. Entries of another
// scheme (v2=...) are skipped, so a later scheme can be added beside v1
// without breaking receivers.
//
// # Why a timestamp and a delivery id
//
// A signature alone proves who sent a body, not when: anyone who captured
// a signed request (a proxy log, a leaked capture) could send it again
// forever. Putting the timestamp inside the MAC binds the signature to a
// moment, and a receiver refuses a timestamp further than its tolerance
// from its own clock, either way, so a captured request is worthless once
// the window has passed. Within the window the timestamp does not help:
// the Verifier remembers every delivery id, and every signed message,
// it accepted until the window has passed, and refuses them a second
// time. The signed message is remembered as well as the id because the
// delivery header is not covered by the signature: a replay with a
// rewritten id is still the same signed message.
//
// A refusal says which check failed (errors.Is with ErrMalformed,
// ErrStale, ErrSignature or ErrReplay), and never quotes a secret or a
// computed MAC.
//
// A genuine sender repeats a delivery only when it did not learn that
// the first attempt arrived. A receiver that answers a replay with 2xx,
// changing nothing, stops those retries; a receiver that verified a
// request but failed to act on it calls Forget before answering an error,
// so the retry is accepted. A retry after the window is a new request to
// the Verifier: a receiver that must act once keys its own effect on the
// delivery id, durably.
package webhook
