// Package notify tells people when they are needed: an approval filed for
// their group, escalated to it, about to expire, or decided, and a call
// that went uncertain. It keeps an organization's channels (a signed
// webhook, Slack through a bot token or an incoming webhook, email over
// SMTP), builds each message from the stored approval or claim, sends it,
// and signs the one-click links that open an approval in the console.
//
// # Channels
//
// A channel serves one approver group of one organization; the channels of
// the group "" are the organization's default, used for a group with none
// of its own and for what belongs to no group (an uncertain call). A
// channel's secret material (the webhook's HMAC key, the Slack URL, the
// SMTP password, a Slack bot token and signing secret) is sealed with the
// deployment's keyring at rest and is never answered: a listing shows
// which secrets are set, not their values. Who may configure channels is this package's rule (MayConfigure):
// a platform administrator.
//
// # Destinations
//
// Where a channel sends is decided by the egress package, as where a
// connection's calls go is: any host name, but only addresses egress
// allows (public ones, and the operator's Config.AllowCIDRs). A channel
// whose host is or resolves to another is refused at creation, and every
// send resolves the host again and dials only the addresses it checked,
// so a name that changes its answer later reaches nothing.
//
// # Delivery
//
// Sending is one attempt (Send), bounded by its context. The durable part
// (a job per event, subject and channel, retried with backoff, given up
// after its attempts) is the background runner's (internal/jobs), which
// tells this package how each delivery ended: Delivered, or Dead, which
// records the delivery in the organization's dead-letter list and answers
// the delivery on the channel's secondary, if it names one.
//
// # Verifying a webhook
//
// A webhook request is signed by the webhook package's scheme with the
// channel's HMAC key (X-Toolplane-Timestamp, X-Toolplane-Signature,
// X-Toolplane-Delivery, and X-Toolplane-Event naming the event); a
// receiver checks it with webhook.Verifier. X-Toolplane-Delivery names
// the event, subject and channel: the same notification retried carries
// the same value, which the Verifier refuses a second time within its
// window.
//
// # Links
//
// A message about an approval carries <public URL>/console/approvals/{id}
// ?link=TOKEN. The token is signed (HMAC-SHA256 under a key derived from
// the keyring) and binds the organization, the approval, the channel it
// was sent on, an expiry and a random nonce. Opening it shows a
// confirmation; only a signed-in approver's POST decides. Links.Check
// verifies a token for an approval; Links.Use also consumes its nonce, so
// a link works once.
//
// # Slack
//
// A Slack message about a pending approval carries Approve and Reject
// buttons valued with the approval's id. With a bot token it is posted
// through the Web API (chat.postMessage) and, once decided from Slack,
// rewritten through chat.update; otherwise it goes to the incoming webhook
// and is rewritten through the press's response_url. The presses
// themselves are the slack package's to verify and decide.
package notify
