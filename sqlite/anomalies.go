package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/sqlstore"
)

var _ toolplane.AnomalyStore = (*Store)(nil)

// TallyAudit answers the call events in [from, until) of every
// organization, counted and their cost summed per organization, agent,
// tool and outcome: organization by organization (see
// sqlstore.TallyAuditByOrganization).
func (s *Store) TallyAudit(ctx context.Context, from, until time.Time) ([]toolplane.AuditTally, error) {
	rows, err := s.query(ctx, sqlstore.TallyAuditByOrganization, micros(from), micros(until))
	if err != nil {
		return nil, fmt.Errorf("tally audit: %w", err)
	}
	out, err := collect(rows, func(r scanner) (toolplane.AuditTally, error) {
		var t toolplane.AuditTally
		err := r.Scan(&t.OrganizationID, &t.AgentID, &t.Tool, &t.Outcome, &t.Calls, &t.CostCents)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("tally audit: %w", err)
	}
	return out, nil
}

// AnomalyWatermark answers the end of the last window folded in, or the
// zero time.
func (s *Store) AnomalyWatermark(ctx context.Context) (time.Time, error) {
	var end int64
	err := s.queryRow(ctx, `SELECT bucket_end FROM anomaly_watermark WHERE id = 1`).Scan(&end)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("anomaly watermark: %w", err)
	}
	return fromMicros(end), nil
}

// AdvanceAnomalyWatermark moves the watermark from from to to, compare and
// swap.
func (s *Store) AdvanceAnomalyWatermark(ctx context.Context, from, to time.Time) (bool, error) {
	var (
		res sql.Result
		err error
	)
	if from.IsZero() {
		res, err = s.exec(ctx, `INSERT INTO anomaly_watermark (id, bucket_end) VALUES (1, ?) ON CONFLICT (id) DO NOTHING`, micros(to))
	} else {
		res, err = s.exec(ctx, `UPDATE anomaly_watermark SET bucket_end = ? WHERE id = 1 AND bucket_end = ?`, micros(to), micros(from))
	}
	if err != nil {
		return false, fmt.Errorf("advance anomaly watermark: %w", err)
	}
	ok, err := affected(res)
	if err != nil {
		return false, fmt.Errorf("advance anomaly watermark: %w", err)
	}
	return ok, nil
}

func scanBaseline(r scanner) (toolplane.AnomalyBaseline, error) {
	var (
		b                    toolplane.AnomalyBaseline
		bucket, lastActive   int64
		calls, den, errs, sp = &b.Stats[0], &b.Stats[1], &b.Stats[2], &b.Stats[3]
		hours                string
	)
	err := r.Scan(&b.OrganizationID, &b.AgentID, &b.Tool, &bucket, &b.Buckets, &lastActive,
		&calls.Mean, &calls.Variance, &den.Mean, &den.Variance, &errs.Mean, &errs.Variance, &sp.Mean, &sp.Variance, &hours)
	if err != nil {
		return b, err
	}
	b.Bucket, b.LastActive = fromMicros(bucket), fromMicros(lastActive)
	return b, sqlstore.DecodeHours(hours, &b.Hours)
}

// ListAnomalyBaselines answers the organization's baselines by agent and
// tool.
func (s *Store) ListAnomalyBaselines(ctx context.Context, org string) ([]toolplane.AnomalyBaseline, error) {
	rows, err := s.query(ctx, `SELECT `+sqlstore.BaselineColumns+` FROM anomaly_baselines
		WHERE organization_id = ? ORDER BY agent_id, tool`, org)
	if err != nil {
		return nil, fmt.Errorf("list anomaly baselines: %w", err)
	}
	out, err := collect(rows, scanBaseline)
	if err != nil {
		return nil, fmt.Errorf("list anomaly baselines: %w", err)
	}
	return out, nil
}

// PutAnomalyBaseline stores b unless the stored one has folded in its
// window or a later one.
func (s *Store) PutAnomalyBaseline(ctx context.Context, b *toolplane.AnomalyBaseline) (bool, error) {
	args, err := sqlstore.BaselineArgs(b)
	if err != nil {
		return false, fmt.Errorf("put anomaly baseline %s/%s: %w", b.AgentID, b.Tool, err)
	}
	res, err := s.exec(ctx, sqlstore.PutBaseline, args...)
	if err != nil {
		return false, fmt.Errorf("put anomaly baseline %s/%s: %w", b.AgentID, b.Tool, err)
	}
	ok, err := affected(res)
	if err != nil {
		return false, fmt.Errorf("put anomaly baseline %s/%s: %w", b.AgentID, b.Tool, err)
	}
	return ok, nil
}

// DeleteAnomalyBaselines removes up to limit baselines last active before
// before.
func (s *Store) DeleteAnomalyBaselines(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := sqlstore.CheckLimit(limit); err != nil {
		return 0, fmt.Errorf("delete anomaly baselines: %w", err)
	}
	res, err := s.exec(ctx, `DELETE FROM anomaly_baselines WHERE (organization_id, agent_id, tool) IN (
		SELECT organization_id, agent_id, tool FROM anomaly_baselines WHERE last_active < ? LIMIT ?)`, micros(before), limit)
	if err != nil {
		return 0, fmt.Errorf("delete anomaly baselines: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("delete anomaly baselines: %w", err)
	}
	return int(n), nil
}

func scanAnomaly(r scanner) (toolplane.Anomaly, error) {
	var (
		a                            toolplane.Anomaly
		start, end, acked, made, upd int64
	)
	err := r.Scan(&a.OrganizationID, &a.ID, &a.AgentID, &a.Tool, &a.Signal, &a.Observed, &a.Mean, &a.StdDev, &a.Score,
		&start, &end, &a.Windows, &a.Status, &a.AcknowledgedBy, &acked, &made, &upd)
	a.WindowStart, a.WindowEnd, a.AcknowledgedAt = fromMicros(start), fromMicros(end), fromMicros(acked)
	a.CreatedAt, a.UpdatedAt = fromMicros(made), fromMicros(upd)
	return a, err
}

// FileAnomaly stores a as a new open item, or updates the open item of
// its agent, tool and signal, and answers the item stored and whether it
// is new.
func (s *Store) FileAnomaly(ctx context.Context, a *toolplane.Anomaly) (*toolplane.Anomaly, bool, error) {
	var (
		got toolplane.Anomaly
		err error
	)
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		got, err = scanAnomaly(tx.QueryRowContext(ctx, sqlstore.FileAnomaly, sqlstore.AnomalyArgs(a)...))
		return err
	})
	if isDuplicate(err) {
		return nil, false, fmt.Errorf("file anomaly %s: %w", a.ID, toolplane.ErrExists)
	}
	if err != nil {
		return nil, false, fmt.Errorf("file anomaly %s: %w", a.ID, err)
	}
	return &got, got.ID == a.ID, nil
}

// GetAnomaly answers the organization's item, or an error wrapping
// toolplane.ErrNotFound.
func (s *Store) GetAnomaly(ctx context.Context, org, id string) (*toolplane.Anomaly, error) {
	a, err := scanAnomaly(s.queryRow(ctx, `SELECT `+sqlstore.AnomalyColumns+` FROM anomalies
		WHERE organization_id = ? AND id = ?`, org, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get anomaly %s: %w", id, toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get anomaly %s: %w", id, err)
	}
	return &a, nil
}

// ListAnomalies answers the organization's items in a state, newest
// first, after the cursor.
func (s *Store) ListAnomalies(ctx context.Context, org string, status toolplane.AnomalyStatus, after string, limit int) ([]toolplane.Anomaly, string, error) {
	var q sqlstore.Query
	err := sqlstore.ListAnomalies(&q, dialect, org, status, after, limit)
	return page(ctx, s, "list anomalies", &q, err, limit, scanAnomaly, sqlstore.AnomalyCursor)
}

// AcknowledgeAnomaly marks the organization's open item acknowledged.
func (s *Store) AcknowledgeAnomaly(ctx context.Context, org, id, by string, at time.Time) (bool, error) {
	res, err := s.exec(ctx, sqlstore.AcknowledgeAnomaly, by, micros(at), org, id)
	if err != nil {
		return false, fmt.Errorf("acknowledge anomaly %s: %w", id, err)
	}
	ok, err := affected(res)
	if err != nil {
		return false, fmt.Errorf("acknowledge anomaly %s: %w", id, err)
	}
	return ok, nil
}
