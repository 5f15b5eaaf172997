package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
)

// providerJobColumns are provider_jobs' columns, in scanProviderJob's order.
const providerJobColumns = `id, organization_id, root_run_id, run_id, tool, key, step_path, provider,
	COALESCE(provider_job_id, ''), refs, state, result, result_digest, cost_cents, units,
	COALESCE(usage_id, ''), created_at, updated_at, terminal_at, expires_at`

func scanProviderJob(row scanner) (*toolplane.ProviderJob, error) {
	var j toolplane.ProviderJob
	var key []byte
	var refs string
	var created, updated, terminal, expires int64
	err := row.Scan(&j.ID, &j.OrganizationID, &j.RootRunID, &j.RunID, &j.Tool, &key, &j.StepPath, &j.Provider,
		&j.ProviderJobID, &refs, &j.State, &j.Result, &j.ResultDigest, &j.CostCents, &j.Units,
		&j.UsageID, &created, &updated, &terminal, &expires)
	if err != nil {
		return nil, err
	}
	j.Key = string(key)
	if err := json.Unmarshal([]byte(refs), &j.Refs); err != nil {
		return nil, fmt.Errorf("refs of provider job %s: %w", j.ID, err)
	}
	j.CreatedAt, j.UpdatedAt, j.TerminalAt, j.ExpiresAt = fromMicros(created), fromMicros(updated), fromMicros(terminal), fromMicros(expires)
	return &j, nil
}

// refsJSON answers refs as the refs column holds them: a JSON array, never
// null.
func refsJSON(refs []string) (string, error) {
	if refs == nil {
		refs = []string{}
	}
	b, err := json.Marshal(refs)
	return string(b), err
}

// ReserveProviderJob inserts j unless a job with its ID exists, then
// answers the stored row.
func (s *Store) ReserveProviderJob(ctx context.Context, j *toolplane.ProviderJob) (*toolplane.ProviderJob, bool, error) {
	refs, err := refsJSON(j.Refs)
	if err != nil {
		return nil, false, fmt.Errorf("reserve provider job %s: %w", j.ID, err)
	}
	var bound any
	if j.ProviderJobID != "" {
		bound = j.ProviderJobID
	}
	res, err := s.exec(ctx, `INSERT INTO provider_jobs
		(id, organization_id, root_run_id, run_id, tool, key, step_path, provider, provider_job_id, refs, state,
		 result, result_digest, cost_cents, units, usage_id, created_at, updated_at, terminal_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING`,
		j.ID, j.OrganizationID, j.RootRunID, j.RunID, j.Tool, []byte(j.Key), j.StepPath, j.Provider, bound, refs, string(j.State),
		j.Result, j.ResultDigest, j.CostCents, j.Units, micros(j.CreatedAt), micros(j.UpdatedAt), micros(j.TerminalAt), micros(j.ExpiresAt))
	if isDuplicate(err) {
		return nil, false, fmt.Errorf("reserve provider job %s: %w", j.ID, toolplane.ErrExists)
	}
	if err != nil {
		return nil, false, fmt.Errorf("reserve provider job %s: %w", j.ID, err)
	}
	inserted, err := affected(res)
	if err != nil {
		return nil, false, fmt.Errorf("reserve provider job %s: %w", j.ID, err)
	}
	got, err := s.GetProviderJob(ctx, j.OrganizationID, j.ID)
	if errors.Is(err, toolplane.ErrNotFound) {
		return nil, false, fmt.Errorf("reserve provider job %s: %w", j.ID, toolplane.ErrExists)
	}
	if err != nil {
		return nil, false, err
	}
	return got, inserted, nil
}

// GetProviderJob answers the organization's job.
func (s *Store) GetProviderJob(ctx context.Context, org, id string) (*toolplane.ProviderJob, error) {
	j, err := scanProviderJob(s.queryRow(ctx, `SELECT `+providerJobColumns+` FROM provider_jobs
		WHERE organization_id = ? AND id = ?`, org, id))
	return j, jobErr(id, err)
}

// LookupProviderJob answers the job with that ID, whatever its
// organization.
func (s *Store) LookupProviderJob(ctx context.Context, id string) (*toolplane.ProviderJob, error) {
	j, err := scanProviderJob(s.queryRow(ctx, `SELECT `+providerJobColumns+` FROM provider_jobs WHERE id = ?`, id))
	return j, jobErr(id, err)
}

func jobErr(id string, err error) error {
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("provider job %s: %w", id, toolplane.ErrNotFound)
	case err != nil:
		return fmt.Errorf("provider job %s: %w", id, err)
	}
	return nil
}

// BindProviderJob binds the vendor's id where none is bound, then reads
// which one is.
func (s *Store) BindProviderJob(ctx context.Context, org, id, providerJobID string, at time.Time) (bool, error) {
	_, err := s.exec(ctx, `UPDATE provider_jobs SET provider_job_id = ?, updated_at = ?
		WHERE organization_id = ? AND id = ? AND provider_job_id IS NULL`, providerJobID, micros(at), org, id)
	if isDuplicate(err) {
		return false, fmt.Errorf("bind provider job %s to %s: %w", id, providerJobID, toolplane.ErrExists)
	}
	if err != nil {
		return false, fmt.Errorf("bind provider job %s: %w", id, err)
	}
	var bound sql.NullString
	err = s.queryRow(ctx, `SELECT provider_job_id FROM provider_jobs WHERE organization_id = ? AND id = ?`, org, id).Scan(&bound)
	if err != nil {
		return false, jobErr(id, err)
	}
	return bound.String == providerJobID, nil
}

// TransitionProviderJob moves the job where its state is one the update
// may leave, with its audit event, in one write.
func (s *Store) TransitionProviderJob(ctx context.Context, org, id string, u *toolplane.ProviderJobUpdate, at time.Time, e *toolplane.AuditEvent) (bool, error) {
	if !u.State.Valid() {
		return false, fmt.Errorf("transition provider job %s to %q: %w", id, u.State, toolplane.ErrInvalid)
	}
	from := u.State.From()
	if len(from) == 0 {
		return false, nil
	}
	var terminal any = zeroMicros
	if u.State.Terminal() {
		terminal = micros(at)
	}
	q := `UPDATE provider_jobs SET state = ?, result = ?, result_digest = ?, cost_cents = ?, units = ?, updated_at = ?, terminal_at = ?
		WHERE organization_id = ? AND id = ? AND state IN (` + placeholders(len(from)) + `)`
	args := []any{string(u.State), u.Result, u.ResultDigest, u.CostCents, u.Units, micros(at), terminal, org, id}
	for _, f := range from {
		args = append(args, string(f))
	}
	if e == nil {
		res, err := s.exec(ctx, q, args...)
		if err != nil {
			return false, fmt.Errorf("transition provider job %s: %w", id, err)
		}
		return affected(res)
	}
	ok, err := s.writeAudited(ctx, q, args, e)
	if err != nil {
		return false, fmt.Errorf("transition provider job %s: %w", id, err)
	}
	return ok, nil
}

// placeholders answers n comma-separated placeholders.
func placeholders(n int) string {
	b := make([]byte, 0, 3*n)
	for i := range n {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, '?')
	}
	return string(b)
}

// PutProviderJobResult stores r once per job and digest.
func (s *Store) PutProviderJobResult(ctx context.Context, r *toolplane.ProviderJobResult) error {
	_, err := s.exec(ctx, `INSERT INTO provider_job_results (organization_id, job_id, digest, body)
		VALUES (?, ?, ?, ?) ON CONFLICT (job_id, digest) DO NOTHING`, r.OrganizationID, r.JobID, r.Digest, r.Body)
	if err != nil {
		// A job of another organization (or none) fails the foreign key.
		return fmt.Errorf("store result %s of provider job %s: %w", r.Digest, r.JobID, err)
	}
	return nil
}

// GetProviderJobResult answers the organization's stored result.
func (s *Store) GetProviderJobResult(ctx context.Context, org, jobID, digest string) (*toolplane.ProviderJobResult, error) {
	r := &toolplane.ProviderJobResult{OrganizationID: org, JobID: jobID, Digest: digest}
	err := s.queryRow(ctx, `SELECT body FROM provider_job_results
		WHERE organization_id = ? AND job_id = ? AND digest = ?`, org, jobID, digest).Scan(&r.Body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("result %s of provider job %s: %w", digest, jobID, toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("result %s of provider job %s: %w", digest, jobID, err)
	}
	return r, nil
}

// SettleProviderJob stamps the usage row's ID where none is, stores the
// row and the event, all in one transaction.
func (s *Store) SettleProviderJob(ctx context.Context, jobID string, u *toolplane.Usage, e *toolplane.AuditEvent) (bool, error) {
	stamp, err := s.prepared(ctx, stampUsage)
	if err != nil {
		return false, fmt.Errorf("settle provider job %s: %w", jobID, err)
	}
	meter, err := s.prepared(ctx, insertJobUsage)
	if err != nil {
		return false, fmt.Errorf("settle provider job %s: %w", jobID, err)
	}
	var ok bool
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		ok = false
		res, err := tx.StmtContext(ctx, stamp).ExecContext(ctx, u.ID, u.OrganizationID, jobID)
		if err != nil {
			return err
		}
		if ok, err = affected(res); err != nil || !ok {
			return err
		}
		res, err = tx.StmtContext(ctx, meter).ExecContext(ctx,
			u.OrganizationID, u.ID, u.RunID, u.RootRunID, u.AgentID, u.Tool, u.CostCents, u.Units, micros(u.CreatedAt))
		if err != nil {
			return err
		}
		if fresh, err := affected(res); err != nil {
			return err
		} else if fresh {
			if _, err := tx.ExecContext(ctx, accrueDay, u.OrganizationID, toolplane.SpendDay(u.CreatedAt), u.CostCents); err != nil {
				return err
			}
		}
		if e != nil {
			c := s.newChainer(ctx, tx)
			if err := c.append(e, nil); err != nil {
				return auditErr(e, err)
			}
			return c.save()
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("settle provider job %s: %w", jobID, err)
	}
	return ok, nil
}

// stampUsage stamps a job's usage row where none is and its vendor ended
// it; insertJobUsage is the meter's insert, a row already there (an
// earlier attempt's) kept.
const (
	stampUsage = `UPDATE provider_jobs SET usage_id = ?
		WHERE organization_id = ? AND id = ? AND usage_id IS NULL AND state IN ('completed', 'failed', 'cancelled')`
	insertJobUsage = `INSERT INTO usage
		(organization_id, id, run_id, root_run_id, agent_id, tool, cost_cents, units, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (organization_id, id) DO NOTHING`
)

// UnsettledProviderJobs answers the organization's unsettled ended jobs.
func (s *Store) UnsettledProviderJobs(ctx context.Context, org string, limit int) ([]toolplane.ProviderJob, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	return s.providerJobs(ctx, `SELECT `+providerJobColumns+` FROM provider_jobs
		WHERE organization_id = ? AND usage_id IS NULL AND state IN ('completed', 'failed', 'cancelled')
		ORDER BY terminal_at, id LIMIT ?`, org, limit)
}

// AllUnsettledProviderJobs answers unsettled ended jobs across
// organizations.
func (s *Store) AllUnsettledProviderJobs(ctx context.Context, limit int) ([]toolplane.ProviderJob, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	return s.providerJobs(ctx, `SELECT `+providerJobColumns+` FROM provider_jobs
		WHERE usage_id IS NULL AND state IN ('completed', 'failed', 'cancelled')
		ORDER BY terminal_at, id LIMIT ?`, limit)
}

// OverdueProviderJobs answers unfinished jobs past their deadline.
func (s *Store) OverdueProviderJobs(ctx context.Context, now time.Time, limit int) ([]toolplane.ProviderJob, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	return s.providerJobs(ctx, `SELECT `+providerJobColumns+` FROM provider_jobs
		WHERE state IN ('submitted', 'running') AND expires_at > 0 AND expires_at < ?
		ORDER BY expires_at, id LIMIT ?`, micros(now), limit)
}

func (s *Store) providerJobs(ctx context.Context, q string, args ...any) ([]toolplane.ProviderJob, error) {
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list provider jobs: %w", err)
	}
	defer rows.Close()
	var out []toolplane.ProviderJob
	for rows.Next() {
		j, err := scanProviderJob(rows)
		if err != nil {
			return nil, fmt.Errorf("list provider jobs: %w", err)
		}
		out = append(out, *j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list provider jobs: %w", err)
	}
	return out, nil
}
