package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane"
)

// providerJobColumns are provider_jobs' columns, in scanProviderJob's order.
const providerJobColumns = `id, organization_id, root_run_id, run_id, tool, key, step_path, provider,
	COALESCE(provider_job_id, ''), refs, state, result, result_digest, cost_cents, units,
	COALESCE(usage_id, ''), created_at, updated_at, terminal_at, expires_at`

func scanProviderJob(row scanner) (*toolplane.ProviderJob, error) {
	var j toolplane.ProviderJob
	var refs string
	var created, updated, terminal, expires int64
	err := row.Scan(&j.ID, &j.OrganizationID, &j.RootRunID, &j.RunID, &j.Tool, byteString{&j.Key}, &j.StepPath, &j.Provider,
		&j.ProviderJobID, &refs, &j.State, &j.Result, &j.ResultDigest, &j.CostCents, &j.Units,
		&j.UsageID, &created, &updated, &terminal, &expires)
	if err != nil {
		return nil, err
	}
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

// reportedStates are toolplane.ReportedJobStates as a query argument.
var reportedStates = func() []string {
	var out []string
	for _, s := range toolplane.ReportedJobStates {
		out = append(out, string(s))
	}
	return out
}()

// ReserveProviderJob inserts j unless a job with its ID exists, then
// answers the stored row.
//
// The insert names no conflict target: with ON CONFLICT (id), concurrent
// reservations of one job could meet on the table's other unique index,
// (organization_id, id), which PostgreSQL checks without the arbiter's
// speculative wait, and one of them failed with a duplicate-key error
// instead of answering the job. Any unique conflict now stores nothing, and
// the read after it says which: the job reserved already (this
// organization's row), or its ID or the vendor's job ID taken by another
// job (no row of this organization with that ID: ErrExists).
func (s *Store) ReserveProviderJob(ctx context.Context, j *toolplane.ProviderJob) (*toolplane.ProviderJob, bool, error) {
	refs, err := refsJSON(j.Refs)
	if err != nil {
		return nil, false, fmt.Errorf("reserve provider job %s: %w", j.ID, err)
	}
	var bound *string
	if j.ProviderJobID != "" {
		bound = &j.ProviderJobID
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO provider_jobs
		(id, organization_id, root_run_id, run_id, tool, key, step_path, provider, provider_job_id, refs, state,
		 result, result_digest, cost_cents, units, usage_id, created_at, updated_at, terminal_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, NULL, $16, $17, $18, $19)
		ON CONFLICT DO NOTHING`,
		j.ID, j.OrganizationID, j.RootRunID, j.RunID, j.Tool, bytea(j.Key), j.StepPath, j.Provider, bound, refs, string(j.State),
		blob(j.Result), j.ResultDigest, j.CostCents, j.Units, micros(j.CreatedAt), micros(j.UpdatedAt), micros(j.TerminalAt), micros(j.ExpiresAt))
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
	return got, tag.RowsAffected() == 1, nil
}

// GetProviderJob answers the organization's job.
func (s *Store) GetProviderJob(ctx context.Context, org, id string) (*toolplane.ProviderJob, error) {
	j, err := scanProviderJob(s.pool.QueryRow(ctx, `SELECT `+providerJobColumns+` FROM provider_jobs
		WHERE organization_id = $1 AND id = $2`, org, id))
	return j, jobErr(id, err)
}

// LookupProviderJob answers the job with that ID, whatever its
// organization.
func (s *Store) LookupProviderJob(ctx context.Context, id string) (*toolplane.ProviderJob, error) {
	j, err := scanProviderJob(s.pool.QueryRow(ctx, `SELECT `+providerJobColumns+` FROM provider_jobs WHERE id = $1`, id))
	return j, jobErr(id, err)
}

func jobErr(id string, err error) error {
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("provider job %s: %w", id, toolplane.ErrNotFound)
	case err != nil:
		return fmt.Errorf("provider job %s: %w", id, err)
	}
	return nil
}

// BindProviderJob binds the vendor's id where none is bound and answers
// which one is, in one statement.
func (s *Store) BindProviderJob(ctx context.Context, org, id, providerJobID string, at time.Time) (bool, error) {
	var bound *string
	err := s.pool.QueryRow(ctx, `WITH bound AS (
			UPDATE provider_jobs SET provider_job_id = $3, updated_at = $4
			WHERE organization_id = $1 AND id = $2 AND provider_job_id IS NULL
			RETURNING provider_job_id)
		SELECT provider_job_id FROM bound
		UNION ALL
		SELECT provider_job_id FROM provider_jobs
		WHERE organization_id = $1 AND id = $2 AND NOT EXISTS (SELECT 1 FROM bound)`,
		org, id, providerJobID, micros(at)).Scan(&bound)
	if isDuplicate(err) {
		return false, fmt.Errorf("bind provider job %s to %s: %w", id, providerJobID, toolplane.ErrExists)
	}
	if err != nil {
		return false, jobErr(id, err)
	}
	return bound != nil && *bound == providerJobID, nil
}

// TransitionProviderJob moves the job where its state is one the update
// may leave, with its audit event, in one transaction.
func (s *Store) TransitionProviderJob(ctx context.Context, org, id string, u *toolplane.ProviderJobUpdate, at time.Time, e *toolplane.AuditEvent) (bool, error) {
	if !u.State.Valid() {
		return false, fmt.Errorf("transition provider job %s to %q: %w", id, u.State, toolplane.ErrInvalid)
	}
	var from []string
	for _, f := range u.State.From() {
		from = append(from, string(f))
	}
	if len(from) == 0 {
		return false, nil
	}
	terminal := zeroMicros
	if u.State.Terminal() {
		terminal = micros(at)
	}
	var ok bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE provider_jobs SET state = $1, result = $2, result_digest = $3, cost_cents = $4, units = $5,
			updated_at = $6, terminal_at = $7
			WHERE organization_id = $8 AND id = $9 AND state = ANY($10)`,
			string(u.State), blob(u.Result), u.ResultDigest, u.CostCents, u.Units, micros(at), terminal, org, id, from)
		if err != nil {
			return err
		}
		if ok = tag.RowsAffected() == 1; !ok || e == nil {
			return nil
		}
		_, err = tx.Exec(ctx, insertAudit, auditArgs(e)...)
		return auditErr(e, err)
	})
	if err != nil {
		return false, fmt.Errorf("transition provider job %s: %w", id, err)
	}
	return ok, nil
}

// PutProviderJobResult stores r once per job and digest.
func (s *Store) PutProviderJobResult(ctx context.Context, r *toolplane.ProviderJobResult) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO provider_job_results (organization_id, job_id, digest, body)
		VALUES ($1, $2, $3, $4) ON CONFLICT (job_id, digest) DO NOTHING`, r.OrganizationID, r.JobID, r.Digest, bytea(string(r.Body)))
	if err != nil {
		// A job of another organization (or none) fails the foreign key.
		return fmt.Errorf("store result %s of provider job %s: %w", r.Digest, r.JobID, err)
	}
	return nil
}

// GetProviderJobResult answers the organization's stored result.
func (s *Store) GetProviderJobResult(ctx context.Context, org, jobID, digest string) (*toolplane.ProviderJobResult, error) {
	r := &toolplane.ProviderJobResult{OrganizationID: org, JobID: jobID, Digest: digest}
	err := s.pool.QueryRow(ctx, `SELECT body FROM provider_job_results
		WHERE organization_id = $1 AND job_id = $2 AND digest = $3`, org, jobID, digest).Scan(&r.Body)
	if errors.Is(err, pgx.ErrNoRows) {
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
	var ok bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE provider_jobs SET usage_id = $1
			WHERE organization_id = $2 AND id = $3 AND usage_id IS NULL AND state = ANY($4)`,
			u.ID, u.OrganizationID, jobID, reportedStates)
		if err != nil {
			return err
		}
		if ok = tag.RowsAffected() == 1; !ok {
			return nil
		}
		if _, err := tx.Exec(ctx, insertJobUsageAccrued,
			u.OrganizationID, u.ID, u.RunID, u.RootRunID, u.AgentID, u.Tool, u.CostCents, u.Units, micros(u.CreatedAt),
			toolplane.SpendDay(u.CreatedAt)); err != nil {
			return err
		}
		if e != nil {
			_, err := tx.Exec(ctx, insertAudit, auditArgs(e)...)
			return auditErr(e, err)
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("settle provider job %s: %w", jobID, err)
	}
	return ok, nil
}

// UnsettledProviderJobs answers the organization's unsettled ended jobs.
func (s *Store) UnsettledProviderJobs(ctx context.Context, org string, limit int) ([]toolplane.ProviderJob, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	return s.providerJobs(ctx, `SELECT `+providerJobColumns+` FROM provider_jobs
		WHERE organization_id = $1 AND usage_id IS NULL AND state IN ('completed', 'failed', 'cancelled')
		ORDER BY terminal_at, id LIMIT $2`, org, limit)
}

// AllUnsettledProviderJobs answers unsettled ended jobs across
// organizations.
func (s *Store) AllUnsettledProviderJobs(ctx context.Context, limit int) ([]toolplane.ProviderJob, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	return s.providerJobs(ctx, `SELECT `+providerJobColumns+` FROM provider_jobs
		WHERE usage_id IS NULL AND state IN ('completed', 'failed', 'cancelled')
		ORDER BY terminal_at, id LIMIT $1`, limit)
}

// OverdueProviderJobs answers unfinished jobs past their deadline.
func (s *Store) OverdueProviderJobs(ctx context.Context, now time.Time, limit int) ([]toolplane.ProviderJob, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	return s.providerJobs(ctx, `SELECT `+providerJobColumns+` FROM provider_jobs
		WHERE state IN ('submitted', 'running') AND expires_at > 0 AND expires_at < $1
		ORDER BY expires_at, id LIMIT $2`, micros(now), limit)
}

func (s *Store) providerJobs(ctx context.Context, q string, args ...any) ([]toolplane.ProviderJob, error) {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list provider jobs: %w", err)
	}
	out, err := collect(rows, func(r scanner) (toolplane.ProviderJob, error) {
		j, err := scanProviderJob(r)
		if err != nil {
			return toolplane.ProviderJob{}, err
		}
		return *j, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list provider jobs: %w", err)
	}
	return out, nil
}
