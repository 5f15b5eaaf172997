package auditchain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
)

// MaxDrop bounds the events one drop deletes in its transaction: a longer
// expired range is dropped as several, each ending at a checkpoint of its
// own.
const MaxDrop = 50_000

// Drop is one range retention dropped from an organization's chain: its
// events From..Through (and those stored before the chain), under the
// signed checkpoint at Through, from which what remains verifies.
type Drop struct {
	OrganizationID string `json:"organization_id"`
	From           int64  `json:"from"`
	Through        int64  `json:"through"`
	// Before is the time the dropped events were all created before.
	Before time.Time `json:"before"`
	// Deleted is how many rows the drop deleted.
	Deleted int `json:"deleted"`
	// CheckpointKey names the key that signed the checkpoint at Through.
	CheckpointKey string `json:"checkpoint_key_id"`
}

// Record makes the audit event of a drop, before the drop is made (it is
// stored in the drop's transaction).
type Record func(d Drop) *toolplane.AuditEvent

// Retain drops the organization's chained events created before before,
// as whole ranges from the first stored event, each ending at a signed
// checkpoint: the one stored at its end, or one signed now with keys'
// newest key after verifying the chain up to there (a broken chain is not
// dropped: the drop would remove the evidence). Each drop stores the
// event record makes, in the drop's own transaction, chained after the
// head. It answers the drops made.
//
// Another pass may drop beside it (another node's, another period's
// outlasting its period, a purge's): the store drops a range only while
// it still starts where this pass read it to (DropAudit's from), so a
// range is dropped and recorded once; this pass then reads what is left
// and drops that.
func Retain(ctx context.Context, s toolplane.AuditChainStore, keys *KeySet, org string, before, now time.Time, record Record) ([]Drop, error) {
	if before.After(now) {
		return nil, fmt.Errorf("audit retention of %s: %w: events before %s are not all written yet", org, toolplane.ErrInvalid, before.Format(time.RFC3339))
	}
	var drops []Drop
	for {
		first, through, err := s.AuditExpired(ctx, org, before)
		if err != nil {
			return drops, fmt.Errorf("audit retention of %s: %w", org, err)
		}
		if through == 0 {
			return drops, nil
		}
		through = min(through, first+MaxDrop-1)
		cp, err := covering(ctx, s, keys, org, through, now)
		if err != nil && droppedBeside(ctx, s, org, before, first) {
			continue
		}
		if err != nil {
			return drops, fmt.Errorf("audit retention of %s: %w", org, err)
		}
		d := Drop{OrganizationID: org, From: first, Through: through, Before: before, Deleted: int(through - first + 1), CheckpointKey: cp.KeyID}
		var ev *toolplane.AuditEvent
		if record != nil {
			ev = record(d)
		}
		n, err := s.DropAudit(ctx, first, cp, ev)
		if err != nil && droppedBeside(ctx, s, org, before, first) {
			continue
		}
		if err != nil {
			return drops, fmt.Errorf("audit retention of %s: %w", org, err)
		}
		d.Deleted = n
		drops = append(drops, d)
	}
}

// droppedBeside answers, after a step of a drop of the range from first
// failed, whether another pass dropped the range's start meanwhile (the
// store refused the drop, or the range's end, its checkpoint or the
// events verified were gone): then what is left is read again and
// dropped, and the failure was no fault. A chain broken or a checkpoint
// not the chain's leaves the start where it was, and is answered.
func droppedBeside(ctx context.Context, s toolplane.AuditChainStore, org string, before time.Time, first int64) bool {
	if ctx.Err() != nil {
		return false
	}
	again, _, err := s.AuditExpired(ctx, org, before)
	return err == nil && again != first
}

// covering answers the checkpoint stored at through, or signs one there
// once the chain up to it verifies.
func covering(ctx context.Context, s toolplane.AuditChainStore, keys *KeySet, org string, through int64, now time.Time) (*toolplane.AuditCheckpoint, error) {
	cps, err := s.AuditCheckpoints(ctx, org, through, through)
	if err != nil {
		return nil, err
	}
	if len(cps) == 1 {
		return &cps[0], nil
	}
	r, err := VerifyStore(ctx, s, keys, org, through, through)
	if err != nil {
		return nil, err
	}
	if !r.OK {
		return nil, fmt.Errorf("%w: the chain is broken, %s at %d: %s", ErrBrokenChain, r.Break.Kind, r.Break.Seq, r.Break.Detail)
	}
	evs, err := s.AuditChain(ctx, org, through, through, 1)
	if err != nil {
		return nil, err
	}
	if len(evs) != 1 {
		return nil, fmt.Errorf("no event at %d: %w", through, toolplane.ErrNotFound)
	}
	cp := &toolplane.AuditCheckpoint{OrganizationID: org, Seq: through, Hash: evs[0].Hash, CreatedAt: now}
	if err := keys.Sign(cp); err != nil {
		return nil, err
	}
	return cp, nil
}

// ErrBrokenChain: retention found the chain broken in the range it was to
// drop, and dropped nothing.
var ErrBrokenChain = errors.New("audit chain broken")

// RetentionPrincipal is who the retention policy's drops are recorded as
// done by.
const RetentionPrincipal = "toolplane:retention"

// DropEvent answers the audit event recording d: what range, under which
// checkpoint, and for a purge (purge set) its proposal and the two people
// who agreed to it; without one, the operator's retention policy did it.
func DropEvent(d Drop, purge *toolplane.AuditPurge, by *toolplane.Credential, at time.Time) *toolplane.AuditEvent {
	subject := fmt.Sprintf("events %d-%d", d.From, d.Through)
	var ev *toolplane.AuditEvent
	if by != nil {
		ev = toolplane.ControlEvent(by, toolplane.AuditRetention, "dropped", subject, at)
	} else {
		ev = &toolplane.AuditEvent{ID: toolplane.NewID("aud_"), OrganizationID: d.OrganizationID, Kind: toolplane.AuditRetention,
			Subject: subject, PrincipalID: RetentionPrincipal, Source: toolplane.SourceControl, Outcome: "dropped", CreatedAt: at}
	}
	ev.OrganizationID = d.OrganizationID
	args := map[string]any{"from": d.From, "through": d.Through, "before": d.Before.UTC().Format(time.RFC3339Nano),
		"checkpoint_seq": d.Through, "checkpoint_key_id": d.CheckpointKey}
	ev.Reason = fmt.Sprintf("events %d to %d, all created before %s, dropped under the checkpoint at %d signed by %s",
		d.From, d.Through, d.Before.UTC().Format(time.RFC3339), d.Through, d.CheckpointKey)
	if purge != nil {
		args["purge_id"], args["proposed_by"], args["confirmed_by"] = purge.ID, purge.ProposedBy, purge.ConfirmedBy
		ev.ApprovalID, ev.ApproverID = purge.ID, purge.ConfirmedBy
		ev.Reason += fmt.Sprintf("; purge %s proposed by %s, confirmed by %s", purge.ID, purge.ProposedBy, purge.ConfirmedBy)
	} else {
		ev.Reason += "; the retention policy"
	}
	ev.Arguments, _ = json.Marshal(args)
	return ev
}

// Expire is the retention job's pass: it drops every organization's
// events created before before (Retain), recording each drop as the
// retention policy's. An organization whose drop fails is reported in the
// error and the others are still dropped.
func Expire(ctx context.Context, s toolplane.AuditChainStore, keys *KeySet, before, now time.Time) ([]Drop, error) {
	var (
		drops []Drop
		errs  []error
	)
	for after := ""; ; {
		orgs, err := s.AuditRetentionOrganizations(ctx, before, after, pageSize)
		if err != nil {
			return drops, fmt.Errorf("audit retention: %w", err)
		}
		for _, org := range orgs {
			d, err := Retain(ctx, s, keys, org, before, now, func(d Drop) *toolplane.AuditEvent { return DropEvent(d, nil, nil, now) })
			drops = append(drops, d...)
			if err != nil {
				if ctx.Err() != nil {
					return drops, err
				}
				errs = append(errs, err)
			}
		}
		if len(orgs) < pageSize {
			return drops, errors.Join(errs...)
		}
		after = orgs[len(orgs)-1]
	}
}
