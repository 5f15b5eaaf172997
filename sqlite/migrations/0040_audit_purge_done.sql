-- A confirmed purge records when its range was all dropped (done_at, 0
-- while the drop is to finish): a drop that failed after the
-- confirmation, or a node stopped between the two, leaves the purge
-- confirmed and not done, and the purge job finishes it.
ALTER TABLE audit_purges ADD COLUMN done_at INTEGER NOT NULL DEFAULT 0;
CREATE INDEX audit_purges_unfinished ON audit_purges (id) WHERE confirmed_by <> '' AND done_at = 0;
