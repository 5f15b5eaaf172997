package providerjob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/httperr"
	"github.com/toolplane/toolplane/journal"
	"github.com/toolplane/toolplane/ratelimit"
)

// Route is the webhook route's pattern: a vendor calls back the URL
// Service.CallbackURL built for the job.
const Route = "POST /v1/webhooks/{provider}/{job_id}"

// MaxBody bounds a delivery's body.
const MaxBody = 2 << 20

// The drop reasons: why a delivery was answered without moving a job.
// Each is counted (Receiver.Dropped); none is an error the vendor should
// retry, except where the route answers 5xx.
const (
	DropRateLimited  = "rate_limited"
	DropTooLarge     = "too_large"
	DropBadSignature = "bad_signature"
	DropUnreadable   = "unreadable"
	// DropUnknownJob: no job has the path's id (deleted, or never ours).
	// Acknowledged: a vendor retrying it would reach nobody.
	DropUnknownJob = "unknown_job"
	// DropJobMismatch: the delivery names another job, or another vendor
	// id, than the job the path names (a vendor defect, or a replay
	// across jobs). Acknowledged, and nothing changes.
	DropJobMismatch = "job_mismatch"
	// DropNotTerminal: a progress report, stored when it moved the job;
	// it takes no claim and asks for no settlement.
	DropNotTerminal = "not_terminal"
	// DropStaleState: an ending that moved nothing, the job having
	// reached another ending already.
	DropStaleState = "stale_state"
	// DropDuplicate: a repeat of a delivery received before, or being
	// handled (its claim is taken).
	DropDuplicate = "duplicate"
)

// DropReasons are every drop reason, for a counter set up before the
// first delivery.
var DropReasons = []string{DropRateLimited, DropTooLarge, DropBadSignature, DropUnreadable, DropUnknownJob,
	DropJobMismatch, DropNotTerminal, DropStaleState, DropDuplicate}

// Settler asks for a job's settlement, durably: once it answers nil the
// settlement happens, on this node or another.
type Settler interface {
	EnqueueSettlement(ctx context.Context, org, jobID string) error
}

// Receiver is the webhook route, a door: it authenticates a vendor's
// delivery by its signature, and moves the job the path names. In order:
//
//  1. the adapter from the path (none: 404);
//  2. the rate limit by client address (429);
//  3. the body, bounded (413), and its signature over the raw bytes (401,
//     nothing read, nothing changed);
//  4. the job by the path's id (none: drop unknown_job, ACK): the tenant
//     comes from the row, never from the body;
//  5. the delivery's job and vendor ids checked against the row (drop
//     job_mismatch, ACK), the vendor id bound where none is;
//  6. a large result stored apart, then the conditional transition with
//     its audit event;
//  7. a progress report ends here (drop not_terminal, ACK);
//  8. an ending that moved nothing because another ending was stored
//     first stops (drop stale_state, ACK); otherwise it takes the
//     webhook.<provider> claim of the delivery (its body's digest as the
//     request hash; a claim taken already: drop duplicate, ACK);
//  9. the settlement is enqueued, and the claim completes;
//  10. ACK.
//
// The row is the truth and is stored (step 6) before anything is
// enqueued: the settlement and a waiting run read it, whatever woke them.
type Receiver struct {
	Jobs     *Service
	Adapters map[string]Adapter
	Journal  *journal.Journal
	Settler  Settler
	// Limiter, when set, bounds deliveries per client address; Proxies
	// says whose X-Forwarded-For to believe.
	Limiter *ratelimit.Limiter
	Proxies *ratelimit.Proxies
	// Dropped, when set, counts a delivery dropped for reason.
	Dropped func(provider, reason string)
	// Node names this node instance on the claims it takes.
	Node string
	Log  *slog.Logger
}

// claimLease is how long a delivery's claim is held while its settlement
// is enqueued.
const claimLease = 30 * time.Second

// ack is the answer to a delivery the route is done with.
var ack = map[string]bool{"received": true}

// ServeHTTP implements http.Handler.
func (rv *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	provider, jobID := r.PathValue("provider"), r.PathValue("job_id")
	a, ok := rv.Adapters[provider]
	if !ok {
		httperr.Send(w, r, httperr.NotFound, "no such webhook", "")
		return
	}
	now := rv.Jobs.cfg.Now()
	if rv.Limiter != nil {
		d := rv.Limiter.Allow("webhook\x00"+rv.Proxies.ClientAddr(r), now)
		d.Header(w.Header(), now)
		if !d.Allowed {
			rv.drop(provider, DropRateLimited)
			httperr.Send(w, r, httperr.RateLimited, "too many deliveries from this address; retry after the reset", "")
			return
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			rv.drop(provider, DropTooLarge)
			httperr.Send(w, r, httperr.TooLarge, "the delivery is larger than the route accepts", "")
			return
		}
		httperr.Send(w, r, httperr.InvalidRequest, "the delivery's body could not be read", "")
		return
	}
	if err := a.Verify(body, r.Header, now); err != nil {
		rv.drop(provider, DropBadSignature)
		httperr.Send(w, r, httperr.Unauthenticated, "the delivery's signature is not valid", "")
		return
	}
	u, err := a.Read(body)
	if err != nil {
		rv.drop(provider, DropUnreadable)
		rv.log().WarnContext(r.Context(), "webhook delivery unreadable", "provider", provider, "job", jobID, "err", err)
		httperr.Send(w, r, httperr.InvalidRequest, "the delivery's body is not one this route reads", "")
		return
	}
	reason, err := rv.apply(r.Context(), a, jobID, u, body, r.Header, now)
	if err != nil {
		// The vendor retries; the delivery changed nothing it cannot
		// change again.
		rv.log().ErrorContext(r.Context(), "webhook delivery not stored", "provider", provider, "job", jobID, "err", err)
		httperr.Send(w, r, httperr.Unavailable, "the delivery could not be stored; retry it", "")
		return
	}
	if reason != "" {
		rv.drop(provider, reason)
	}
	httperr.WriteJSON(w, http.StatusOK, ack)
}

// apply does steps 4 to 9 for a verified delivery, and answers the drop
// reason ("" for none), or an error for the vendor to retry.
func (rv *Receiver) apply(ctx context.Context, a Adapter, jobID string, u *Update, body []byte, header http.Header, now time.Time) (string, error) {
	store := rv.Jobs.cfg.Store
	j, err := store.LookupProviderJob(ctx, jobID)
	if errors.Is(err, toolplane.ErrNotFound) {
		return DropUnknownJob, nil
	}
	if err != nil {
		return "", err
	}
	provider := a.Provider()
	switch {
	case j.Provider != provider, u.JobID != "" && u.JobID != j.ID, u.ProviderJobID == "":
		return DropJobMismatch, nil
	case j.ProviderJobID != "":
		if j.ProviderJobID != u.ProviderJobID {
			return DropJobMismatch, nil
		}
	case u.JobID == "":
		// Nothing the vendor signed ties this delivery to this job:
		// the path alone does not bind a vendor id.
		return DropJobMismatch, nil
	default:
		ok, err := store.BindProviderJob(ctx, j.OrganizationID, j.ID, u.ProviderJobID, now)
		if errors.Is(err, toolplane.ErrExists) || err == nil && !ok {
			return DropJobMismatch, nil
		}
		if err != nil {
			return "", err
		}
	}
	next := &toolplane.ProviderJobUpdate{State: u.State, Result: u.Result, CostCents: u.CostCents, Units: u.Units}
	if len(next.Result) > toolplane.MaxInlineJobResult {
		sum := sha256.Sum256(next.Result)
		r := &toolplane.ProviderJobResult{OrganizationID: j.OrganizationID, JobID: j.ID, Digest: hex.EncodeToString(sum[:]), Body: next.Result}
		if err := store.PutProviderJobResult(ctx, r); err != nil {
			return "", err
		}
		next.Result, next.ResultDigest = nil, r.Digest
	}
	ev := jobEvent(j, "provider_job_"+string(u.State), toolplane.SourceWebhook, now)
	moved, err := store.TransitionProviderJob(ctx, j.OrganizationID, j.ID, next, now, ev)
	if err != nil {
		return "", err
	}
	if moved {
		rv.Jobs.wake(j.ID)
	}
	if !u.State.Reported() {
		return DropNotTerminal, nil
	}
	if !moved {
		// Another ending came first, or this one did: only a repeat of
		// the stored ending goes on to its claim, which makes sure its
		// settlement was asked for (a node lost after the transition).
		now, err := store.GetProviderJob(ctx, j.OrganizationID, j.ID)
		if err != nil {
			return "", err
		}
		if now.State != u.State {
			return DropStaleState, nil
		}
	}
	sum := sha256.Sum256(body)
	out, cl, err := rv.Journal.Claim(ctx, journal.Request{OrganizationID: j.OrganizationID, Tool: "webhook." + provider,
		Key: a.DeliveryID(body, header), RequestHash: hex.EncodeToString(sum[:]), MaxAttempts: 1,
		Owner: "webhook:" + rv.Node, Lease: claimLease, Node: rv.Node, RunID: j.RunID})
	if err != nil {
		return "", err
	}
	if out != journal.Claimed {
		// Received before (completed) or being handled (processing) by a
		// twin, whose claim asks for the settlement; a body under a known
		// delivery id that differs from it (conflict) asks for nothing
		// the stored ending needs. The settlement sweep finds whatever is
		// left unsettled.
		return DropDuplicate, nil
	}
	if err := rv.Settler.EnqueueSettlement(ctx, j.OrganizationID, j.ID); err != nil {
		_ = rv.Journal.Release(context.WithoutCancel(ctx), cl)
		return "", err
	}
	answer, _ := json.Marshal(map[string]string{"job_id": j.ID, "state": string(u.State)})
	if err := rv.Journal.Complete(context.WithoutCancel(ctx), cl, answer, nil); err != nil {
		return "", err
	}
	return "", nil
}

func (rv *Receiver) drop(provider, reason string) {
	if rv.Dropped != nil {
		rv.Dropped(provider, reason)
	}
}

func (rv *Receiver) log() *slog.Logger {
	if rv.Log == nil {
		return slog.Default()
	}
	return rv.Log
}
