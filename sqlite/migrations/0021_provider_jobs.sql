-- Provider jobs: work a vendor finishes after the call that submitted it
-- returned. id is minted before the vendor is called and is unique across
-- organizations, since a vendor's callback names the job alone and the
-- row says whose it is. A vendor's own id is bound once; (provider,
-- provider_job_id) is unique, and NULL (not bound yet) repeats freely.
-- refs is the ordered list of references the submission named (JSON).
-- key is the submitting call's idempotency key, kept byte for byte.
CREATE TABLE provider_jobs (
	id              TEXT NOT NULL PRIMARY KEY,
	organization_id TEXT NOT NULL,
	root_run_id     TEXT NOT NULL,
	run_id          TEXT NOT NULL,
	tool            TEXT NOT NULL,
	key             BLOB NOT NULL,
	step_path       TEXT NOT NULL,
	provider        TEXT NOT NULL,
	provider_job_id TEXT,
	refs            TEXT NOT NULL CHECK (json_valid(refs)),
	state           TEXT NOT NULL,
	result          BLOB,
	result_digest   TEXT NOT NULL,
	cost_cents      INTEGER NOT NULL,
	units           INTEGER NOT NULL,
	usage_id        TEXT,
	created_at      INTEGER NOT NULL,
	updated_at      INTEGER NOT NULL,
	terminal_at     INTEGER NOT NULL,
	expires_at      INTEGER NOT NULL,
	UNIQUE (organization_id, id),
	UNIQUE (provider, provider_job_id)
) STRICT;

-- The settlement sweep and the unsettled list: ended by the vendor, no
-- usage row stamped yet.
CREATE INDEX provider_jobs_unsettled ON provider_jobs (organization_id, terminal_at)
	WHERE usage_id IS NULL AND state IN ('completed', 'failed', 'cancelled');
CREATE INDEX provider_jobs_unsettled_all ON provider_jobs (terminal_at)
	WHERE usage_id IS NULL AND state IN ('completed', 'failed', 'cancelled');

-- The expiry sweep: unfinished jobs by deadline.
CREATE INDEX provider_jobs_open ON provider_jobs (expires_at)
	WHERE state IN ('submitted', 'running') AND expires_at > 0;

-- A job's result too large for its row, stored once per digest. The
-- composite key to the job makes a result of another organization's job
-- impossible to store, and the results go with their job.
CREATE TABLE provider_job_results (
	organization_id TEXT NOT NULL,
	job_id          TEXT NOT NULL,
	digest          TEXT NOT NULL,
	body            BLOB NOT NULL,
	PRIMARY KEY (job_id, digest),
	FOREIGN KEY (organization_id, job_id) REFERENCES provider_jobs (organization_id, id) ON DELETE CASCADE
) STRICT;
