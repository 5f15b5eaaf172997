package providerjob

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
)

// Adapter is one vendor's side of the webhook route: it says whether a
// delivery is authentic and what it reports, in the platform's
// vocabulary. It touches no job, run, meter or claim. The route calls
// Verify first, over the raw body, and DeliveryID and Read only once it
// passed, so nothing unverified is ever read.
//
// Each adapter signs with one deployment-wide secret: verification needs
// no tenant, and so happens before the job (which names the tenant) is
// read.
type Adapter interface {
	// Provider is the adapter's name, the route's {provider} segment.
	Provider() string
	// Verify answers nil when body, with header, is signed by the vendor
	// and fresh at now; an error wrapping ErrSignature otherwise.
	Verify(body []byte, header http.Header, now time.Time) error
	// DeliveryID answers the delivery's identity: the same for every
	// retry of one delivery, another for another.
	DeliveryID(body []byte, header http.Header) string
	// Read answers what the verified body reports.
	Read(body []byte) (*Update, error)
}

// ErrSignature: a delivery's signature is missing, wrong or stale.
var ErrSignature = errors.New("webhook signature not valid")

// Update is what a vendor's delivery reports of a job.
type Update struct {
	// ProviderJobID is the vendor's own id for the job.
	ProviderJobID string
	// JobID is the platform job id the body names, when the vendor echoes
	// one (a batch name, metadata): the route refuses a delivery that
	// names another job than its path.
	JobID string
	State toolplane.ProviderJobState
	// Result is the vendor's result (JSON); partial results of a failed
	// or cancelled job included.
	Result json.RawMessage
	// CostCents and Units are what the vendor reported the job cost.
	CostCents int64
	Units     int64
}

// bodyDigest answers the SHA-256 of body, hex.
func bodyDigest(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// Timestamped is a vendor that signs like Stripe: a header
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">" (several v1 while
// the vendor rotates its secret), refused once older (or newer) than
// Tolerance, so a captured delivery cannot be replayed later. Its body is
// an event:
//
//	{"id": "evt_…", "type": "…",
//	 "data": {"object": {"id": "<vendor job id>", "status": "processing|succeeded|failed|canceled",
//	                     "metadata": {"toolplane_job_id": "pj_…"},
//	                     "cost": {"cents": 120, "units": 3}, "result": {…}}}}
//
// The event id is the delivery id.
type Timestamped struct {
	Name   string
	Secret toolplane.SecretString
	// Header is the signature header; default "Stripe-Signature".
	Header string
	// Tolerance is how far a delivery's time may be from now; default
	// five minutes.
	Tolerance time.Duration
}

// Provider implements Adapter.
func (a *Timestamped) Provider() string { return a.Name }

func (a *Timestamped) header() string {
	if a.Header == "" {
		return "Stripe-Signature"
	}
	return a.Header
}

// Verify implements Adapter.
func (a *Timestamped) Verify(body []byte, header http.Header, now time.Time) error {
	if a.Secret == "" {
		return fmt.Errorf("%w: no secret configured for %s", ErrSignature, a.Name)
	}
	var ts string
	var sigs []string
	for part := range strings.SplitSeq(header.Get(a.header()), ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return fmt.Errorf("%w: no timestamp or signature", ErrSignature)
	}
	tolerance := a.Tolerance
	if tolerance <= 0 {
		tolerance = 5 * time.Minute
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: the delivery's time is outside the tolerance", ErrSignature)
	}
	mac := hmac.New(sha256.New, []byte(a.Secret.Reveal()))
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	want := mac.Sum(nil)
	for _, s := range sigs {
		if got, err := hex.DecodeString(s); err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return fmt.Errorf("%w: no signature matches", ErrSignature)
}

// SignTimestamped answers the header value a Timestamped vendor sends for
// body at t with secret: for tests, and for a sender of such deliveries.
func SignTimestamped(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

type timestampedEvent struct {
	ID   string `json:"id"`
	Data struct {
		Object struct {
			ID       string            `json:"id"`
			Status   string            `json:"status"`
			Metadata map[string]string `json:"metadata"`
			Cost     struct {
				Cents int64 `json:"cents"`
				Units int64 `json:"units"`
			} `json:"cost"`
			Result json.RawMessage `json:"result"`
		} `json:"object"`
	} `json:"data"`
}

// DeliveryID implements Adapter: the event's id, or the body's digest for
// an event without one.
func (a *Timestamped) DeliveryID(body []byte, _ http.Header) string {
	var ev timestampedEvent
	if json.Unmarshal(body, &ev) == nil && ev.ID != "" {
		return ev.ID
	}
	return "sha256:" + bodyDigest(body)
}

// Read implements Adapter.
func (a *Timestamped) Read(body []byte) (*Update, error) {
	var ev timestampedEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, fmt.Errorf("%s delivery: %w", a.Name, err)
	}
	o := ev.Data.Object
	var state toolplane.ProviderJobState
	switch o.Status {
	case "pending", "processing", "running":
		state = toolplane.JobRunning
	case "succeeded", "completed":
		state = toolplane.JobCompleted
	case "failed":
		state = toolplane.JobFailed
	case "canceled", "cancelled":
		state = toolplane.JobCancelled
	default:
		return nil, fmt.Errorf("%s delivery: unknown status %q", a.Name, o.Status)
	}
	return &Update{ProviderJobID: o.ID, JobID: o.Metadata["toolplane_job_id"], State: state, Result: o.Result,
		CostCents: o.Cost.Cents, Units: o.Cost.Units}, nil
}

// BodySigned is a vendor that signs like FullEnrich: a header
// X-Signature-SHA1 holding the hex HMAC-SHA1 of the raw body, with no
// timestamp and no delivery id. It posts once, at the job's ending. Its
// body is the batch:
//
//	{"id": "<vendor batch id>", "name": "toolplane:<job id>",
//	 "status": "CREATED|IN_PROGRESS|FINISHED|CANCELED|CREDITS_INSUFFICIENT|…",
//	 "cost": {"credits": 3}, "data": […]}
//
// The batch name the submission gave carries the platform job id, so a
// delivery for one job cannot be taken for another's. With no delivery
// id, a delivery is known by its body's digest: a retry is the same body.
// With no timestamp, a replay of a captured delivery is recognized by
// that digest (its claim) and by the job's state, never refused for age.
type BodySigned struct {
	Name   string
	Secret toolplane.SecretString
	// CentsPerCredit prices one credit the vendor reports.
	CentsPerCredit int64
}

// BatchName answers the batch name a submission gives job, which the
// vendor echoes in its callback.
func BatchName(jobID string) string { return "toolplane:" + jobID }

// Provider implements Adapter.
func (a *BodySigned) Provider() string { return a.Name }

// Verify implements Adapter.
func (a *BodySigned) Verify(body []byte, header http.Header, _ time.Time) error {
	if a.Secret == "" {
		return fmt.Errorf("%w: no secret configured for %s", ErrSignature, a.Name)
	}
	got, err := hex.DecodeString(strings.TrimPrefix(header.Get("X-Signature-SHA1"), "sha1="))
	if err != nil || len(got) == 0 {
		return fmt.Errorf("%w: no signature", ErrSignature)
	}
	if !hmac.Equal(got, SignSHA1(a.Secret.Reveal(), body)) {
		return fmt.Errorf("%w: the signature does not match", ErrSignature)
	}
	return nil
}

// SignSHA1 answers the HMAC-SHA1 of body under secret, as a BodySigned
// vendor sends it (hex-encoded).
func SignSHA1(secret string, body []byte) []byte {
	mac := hmac.New(sha1.New, []byte(secret))
	mac.Write(body)
	return mac.Sum(nil)
}

// DeliveryID implements Adapter: the body's digest.
func (a *BodySigned) DeliveryID(body []byte, _ http.Header) string {
	return "sha256:" + bodyDigest(body)
}

type batch struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Status string `json:"status"`
	Cost   struct {
		Credits int64 `json:"credits"`
	} `json:"cost"`
	Data json.RawMessage `json:"data"`
}

// Read implements Adapter.
func (a *BodySigned) Read(body []byte) (*Update, error) {
	var b batch
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("%s delivery: %w", a.Name, err)
	}
	var state toolplane.ProviderJobState
	switch strings.ToUpper(b.Status) {
	case "CREATED", "IN_PROGRESS":
		state = toolplane.JobRunning
	case "FINISHED":
		state = toolplane.JobCompleted
	case "CANCELED", "CANCELLED":
		state = toolplane.JobCancelled
	case "CREDITS_INSUFFICIENT", "FAILED", "ERROR", "RATE_LIMIT", "UNKNOWN":
		state = toolplane.JobFailed
	default:
		return nil, fmt.Errorf("%s delivery: unknown status %q", a.Name, b.Status)
	}
	u := &Update{ProviderJobID: b.ID, State: state, Result: b.Data, Units: b.Cost.Credits, CostCents: b.Cost.Credits * a.CentsPerCredit}
	if id, ok := strings.CutPrefix(b.Name, "toolplane:"); ok {
		u.JobID = id
	}
	return u, nil
}
