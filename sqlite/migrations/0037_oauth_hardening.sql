-- signed_in_at: when the person signed in to the browser session they
-- consented in. A consent through the OpenID provider stops refreshing
-- once that sign-in is older than the operator's bound
-- (serve --oauth-oidc-max-age). Consents given before this migration
-- count from their creation, the latest their sign-in can have been.
ALTER TABLE oauth_grants ADD COLUMN signed_in_at INTEGER NOT NULL DEFAULT 0;
UPDATE oauth_grants SET signed_in_at = created_at;

-- The sweep of registered clients nobody consented to looks for any
-- grant or setting naming the client, in every organization.
CREATE INDEX oauth_grants_by_client_id ON oauth_grants (client_id);
CREATE INDEX oauth_client_settings_by_client ON oauth_client_settings (client_id);
CREATE INDEX oauth_clients_by_source ON oauth_clients (source, created_at);
