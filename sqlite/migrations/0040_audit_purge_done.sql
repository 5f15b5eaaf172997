-- A confirmed purge records when its range was all dropped (done_at, 0
-- while the drop is to finish): a drop that failed after the
-- confirmation, or a node stopped between the two, leaves the purge
-- confirmed and not done, and the purge job finishes it.
--
-- A purge confirmed before this migration counts as not done: under the
-- earlier code a drop that failed after its confirmation left no mark, so
-- none can be told from one that completed. The purge job finishes each
-- once — nothing left to drop for one that had completed — and records its
-- completion then.
ALTER TABLE audit_purges ADD COLUMN done_at INTEGER NOT NULL DEFAULT 0;
CREATE INDEX audit_purges_unfinished ON audit_purges (id) WHERE confirmed_by <> '' AND done_at = 0;
