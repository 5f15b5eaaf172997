package console

import "context"

// Links checks the signed, single-use, expiring links a notification
// carries to open an approval in the console. The console accepts them
// optionally (Config.Links): opening a link shows the approval's card with
// a confirmation, and nothing is decided by opening it (a link scanner
// fetching it decides nothing); the decision is a POST by a signed-in
// approver carrying the token, which is used once.
type Links interface {
	// Check answers nil when token is a link to approval approvalID that
	// this deployment signed and that has not expired. It reads nothing
	// and uses nothing up: whether the link was used already, Use tells
	// when the decision is posted.
	Check(token, approvalID string) error
	// Use uses the link up, once: a second Use of the same token fails, as
	// does a token that Check would refuse.
	Use(ctx context.Context, token, approvalID string) error
}
