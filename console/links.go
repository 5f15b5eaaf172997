package console

import "context"

// Links checks the signed, single-use, expiring links a notification
// carries to open an approval in the console. The console accepts them
// optionally (Config.Links): opening a link shows the approval's card with
// a confirmation, and nothing is decided by opening it (a link scanner
// fetching it decides nothing); the decision is a POST by a signed-in
// approver carrying the token, which is used once.
type Links interface {
	// Check answers nil when token is a valid, unused, unexpired link to
	// approval approvalID; it does not use the link up.
	Check(ctx context.Context, token, approvalID string) error
	// Use uses the link up, once: a second Use of the same token fails, as
	// does a token that Check would refuse.
	Use(ctx context.Context, token, approvalID string) error
}
