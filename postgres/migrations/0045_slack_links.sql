-- Which toolplane person a Slack account acts as when it presses an
-- approval's button (toolplane.SlackLink): one row per organization,
-- Slack workspace (team) and Slack account (user). credential_id is the
-- person credential the account decides with, read again at every
-- decision, so a revoked or expired key decides nothing; subject is that
-- credential's person, kept to show the link; channel is the toolplane
-- notification channel (the Slack app) the link was made through, the only
-- one whose presses it decides: another app's signing secret, however
-- leaked, never decides as the person. A Slack account linked in
-- one organization is another row, unknown, in every other.
CREATE TABLE slack_links (
	organization_id TEXT COLLATE "C" NOT NULL,
	team            TEXT COLLATE "C" NOT NULL,
	user_id         TEXT COLLATE "C" NOT NULL,
	credential_id   TEXT COLLATE "C" NOT NULL,
	subject         TEXT COLLATE "C" NOT NULL,
	channel         TEXT COLLATE "C" NOT NULL,
	created_at      BIGINT NOT NULL,
	PRIMARY KEY (organization_id, team, user_id)
);
