package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/egress"
	"github.com/toolplane/toolplane/secret"
)

// Errors a channel's configuration is refused with.
var (
	ErrNotAuthorized = toolplane.Refine(toolplane.ErrForbidden, "not allowed to configure notifications")
	ErrChannel       = toolplane.Refine(toolplane.ErrInvalid, "notification channel not valid")
)

// MayConfigure refuses a caller who may not configure the organization's
// notification channels: a person holding platform_admin. Channels decide
// where approvals and their one-click links go, so they are the
// administrator's, as connections are.
func MayConfigure(by *toolplane.Credential) error {
	if !by.HasAnyRole(toolplane.RolePlatformAdmin) {
		return toolplane.Refuse(by, ErrNotAuthorized, "configuring notification channels needs the platform_admin role")
	}
	return nil
}

// MayReadDeliveries refuses a caller who may not read the organization's
// undelivered notifications: a platform administrator or an auditor.
func MayReadDeliveries(by *toolplane.Credential) error {
	if !by.HasAnyRole(toolplane.RolePlatformAdmin, toolplane.RoleAuditor) {
		return toolplane.Refuse(by, ErrNotAuthorized, "reading notification deliveries needs the platform_admin or auditor role")
	}
	return nil
}

// Store is what the service keeps and reads.
type Store interface {
	toolplane.NotificationStore
	GetApproval(ctx context.Context, org, id string) (*toolplane.Approval, error)
	GetClaim(ctx context.Context, org, tool, key string) (*toolplane.Claim, error)
}

// Service keeps channels, sends notifications and signs links.
type Service struct {
	store  Store
	keys   *secret.Keyring
	public string
	now    func() time.Time
	send   senders
	links  *Links
	lead   time.Duration
	// dest decides where a channel may send: every host name, but only
	// to addresses the egress rules allow (public ones, and the
	// operator's AllowCIDRs).
	dest *egress.Policy
	// slackAPI and slackHooks are Config's, defaulted.
	slackAPI, slackHooks string
}

// Config is what a Service is built from. Store and Keys are required.
type Config struct {
	Store Store
	Keys  *secret.Keyring
	// PublicURL is where people reach the console
	// (https://toolplane.example.com); links are built on it.
	PublicURL string
	// LinkTTL is how long a one-click link works; default 24 hours, and
	// never past the approval's own expiry.
	LinkTTL time.Duration
	// Timeout bounds one attempt at a channel when the caller's context
	// sets no sooner deadline; default 10 seconds.
	Timeout time.Duration
	// ExpiryLead is how long before an approval expires its approvers are
	// reminded; default DefaultExpiryLead.
	ExpiryLead time.Duration
	// AllowCIDRs are the address ranges (or single addresses) channels
	// may reach besides public addresses: the operator's switch for an
	// internal webhook receiver or mail relay. Without it a channel whose
	// host is, or resolves to, a loopback, private, link-local, cloud
	// metadata or other address egress refuses is refused at creation and
	// at every send, as a connection without allow_cidrs is; a metadata
	// address is admitted only by an entry of that single address.
	AllowCIDRs []string
	// SlackAPI is the base of Slack's Web API a channel with a bot token
	// posts to and updates its messages through; default
	// DefaultSlackAPI. A test points it at a local fake.
	SlackAPI string
	// SlackHooks is what every response_url a button press carries must
	// start with to be answered; default DefaultSlackHooks.
	SlackHooks string
	// Resolver resolves channels' host names; nil is the system's.
	Resolver egress.Resolver
	Now      func() time.Time
}

// Errors New answers for a Config whose Slack addresses it cannot use,
// so the operator is told which setting to fix.
var (
	ErrSlackAPI   = toolplane.Refine(toolplane.ErrInvalid, "the Slack Web API address is not valid")
	ErrSlackHooks = toolplane.Refine(toolplane.ErrInvalid, "the Slack response_url prefix is not valid")
)

// New answers a service built from cfg.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Keys == nil {
		return nil, fmt.Errorf("%w: notify needs a store and a keyring", toolplane.ErrInvalid)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.ExpiryLead <= 0 {
		cfg.ExpiryLead = DefaultExpiryLead
	}
	if cfg.SlackAPI == "" {
		cfg.SlackAPI = DefaultSlackAPI
	}
	if cfg.SlackHooks == "" {
		cfg.SlackHooks = DefaultSlackHooks
	}
	if checkURL(cfg.SlackAPI) != nil {
		return nil, fmt.Errorf("%w: %q is not an http(s) URL", ErrSlackAPI, cfg.SlackAPI)
	}
	if checkURL(cfg.SlackHooks) != nil || !strings.HasSuffix(cfg.SlackHooks, "/") {
		return nil, fmt.Errorf("%w: %q is not an http(s) URL ending in /", ErrSlackHooks, cfg.SlackHooks)
	}
	links, err := NewLinks(cfg.Keys, cfg.Store, cfg.LinkTTL, cfg.Now)
	if err != nil {
		return nil, err
	}
	opts := []egress.Option{egress.AnyHost()}
	if cfg.Resolver != nil {
		opts = append(opts, egress.WithResolver(cfg.Resolver))
	}
	dest, err := egress.Compile(toolplane.EgressRules{AllowCIDRs: cfg.AllowCIDRs}, opts...)
	if err != nil {
		return nil, fmt.Errorf("notify: the ranges channels may reach: %w", err)
	}
	return &Service{store: cfg.Store, keys: cfg.Keys, public: strings.TrimRight(cfg.PublicURL, "/"), now: cfg.Now,
		send: senders{timeout: cfg.Timeout, dest: dest, slackAPI: strings.TrimRight(cfg.SlackAPI, "/")}, links: links, lead: cfg.ExpiryLead, dest: dest,
		slackAPI: strings.TrimRight(cfg.SlackAPI, "/"), slackHooks: cfg.SlackHooks}, nil
}

// Links answers the service's link signer, which the console checks links
// with.
func (s *Service) Links() *Links { return s.links }

// NewChannel is a channel as an administrator asks for it: its settings
// and its secrets in clear.
type NewChannel struct {
	Name      string
	Group     string
	Kind      toolplane.ChannelKind
	Config    toolplane.ChannelConfig
	Secrets   toolplane.ChannelSecrets
	Secondary string
}

// Shown is a channel as it is answered: its settings, and which of its
// secrets are set, never their values.
type Shown struct {
	toolplane.NotificationChannel
	// SecretsSet names the secrets the channel holds (hmac_key,
	// slack_url, password, slack_bot_token, slack_signing_secret).
	SecretsSet []string `json:"secrets_set,omitempty"`
}

// channelAAD is the additional data a channel's secrets are sealed with,
// so sealed bytes copied to another channel do not open there.
func channelAAD(org, id string) []byte { return []byte("notification-channel\x00" + org + "\x00" + id) }

// Create stores a new channel of the caller's organization.
func (s *Service) Create(ctx context.Context, n NewChannel, by *toolplane.Credential) (*Shown, error) {
	if err := MayConfigure(by); err != nil {
		return nil, err
	}
	if err := check(n); err != nil {
		return nil, err
	}
	if err := s.checkDestination(ctx, n); err != nil {
		return nil, err
	}
	org := by.OrganizationID
	if n.Secondary != "" {
		if _, err := s.store.GetNotificationChannel(ctx, org, n.Secondary); err != nil {
			return nil, fmt.Errorf("%w: secondary channel %s: %w", ErrChannel, n.Secondary, err)
		}
	}
	c := &toolplane.NotificationChannel{ID: toolplane.NewID("nch_"), OrganizationID: org, Name: n.Name, Group: n.Group,
		Kind: n.Kind, Config: n.Config, Secondary: n.Secondary, CreatedBy: by.Subject, CreatedAt: s.now()}
	sealed, err := s.seal(c, n.Secrets)
	if err != nil {
		return nil, err
	}
	c.Secret = sealed
	if err := s.store.InsertNotificationChannel(ctx, c); err != nil {
		return nil, fmt.Errorf("create notification channel %s: %w", n.Name, err)
	}
	return shown(c, n.Secrets), nil
}

// List answers the caller's organization's channels, without secrets.
func (s *Service) List(ctx context.Context, by *toolplane.Credential) ([]Shown, error) {
	if err := MayConfigure(by); err != nil {
		return nil, err
	}
	cs, err := s.store.ListNotificationChannels(ctx, by.OrganizationID)
	if err != nil {
		return nil, fmt.Errorf("list notification channels: %w", err)
	}
	out := make([]Shown, 0, len(cs))
	for i := range cs {
		sec, err := s.open(&cs[i])
		if err != nil {
			return nil, err
		}
		out = append(out, *shown(&cs[i], sec))
	}
	return out, nil
}

// Get answers one channel of the caller's organization, without secrets.
func (s *Service) Get(ctx context.Context, id string, by *toolplane.Credential) (*Shown, error) {
	if err := MayConfigure(by); err != nil {
		return nil, err
	}
	c, err := s.store.GetNotificationChannel(ctx, by.OrganizationID, id)
	if err != nil {
		return nil, fmt.Errorf("notification channel %s: %w", id, err)
	}
	sec, err := s.open(c)
	if err != nil {
		return nil, err
	}
	return shown(c, sec), nil
}

// Delete removes a channel of the caller's organization. Deliveries under
// way on it end at their next attempt.
func (s *Service) Delete(ctx context.Context, id string, by *toolplane.Credential) error {
	if err := MayConfigure(by); err != nil {
		return err
	}
	ok, err := s.store.DeleteNotificationChannel(ctx, by.OrganizationID, id)
	if err != nil {
		return fmt.Errorf("delete notification channel %s: %w", id, err)
	}
	if !ok {
		return fmt.Errorf("notification channel %s: %w", id, toolplane.ErrNotFound)
	}
	return nil
}

// DeadLetters answers the caller's organization's notifications given up,
// newest first: what a console page shows.
func (s *Service) DeadLetters(ctx context.Context, limit int, by *toolplane.Credential) ([]toolplane.NotificationDelivery, error) {
	if err := MayReadDeliveries(by); err != nil {
		return nil, err
	}
	ds, err := s.store.ListDeliveries(ctx, by.OrganizationID, toolplane.DeliveryDead, limit)
	if err != nil {
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	return ds, nil
}

func shown(c *toolplane.NotificationChannel, sec toolplane.ChannelSecrets) *Shown {
	out := &Shown{NotificationChannel: *c}
	out.Secret = nil
	if sec.HMACKey != "" {
		out.SecretsSet = append(out.SecretsSet, "hmac_key")
	}
	if sec.SlackURL != "" {
		out.SecretsSet = append(out.SecretsSet, "slack_url")
	}
	if sec.Password != "" {
		out.SecretsSet = append(out.SecretsSet, "password")
	}
	if sec.SlackBotToken != "" {
		out.SecretsSet = append(out.SecretsSet, "slack_bot_token")
	}
	if sec.SlackSigningSecret != "" {
		out.SecretsSet = append(out.SecretsSet, "slack_signing_secret")
	}
	return out
}

// plainChannelSecrets is ChannelSecrets in clear, as sealed: its field
// names are the sealed format.
type plainChannelSecrets struct {
	HMACKey  string `json:"hmac_key,omitempty"`
	SlackURL string `json:"slack_url,omitempty"`
	Password string `json:"password,omitempty"`
	SlackBot string `json:"slack_bot_token,omitempty"`
	SlackSig string `json:"slack_signing_secret,omitempty"`
}

func (s *Service) seal(c *toolplane.NotificationChannel, sec toolplane.ChannelSecrets) ([]byte, error) {
	plain, err := json.Marshal(plainChannelSecrets{HMACKey: sec.HMACKey.Reveal(), SlackURL: sec.SlackURL.Reveal(), Password: sec.Password.Reveal(),
		SlackBot: sec.SlackBotToken.Reveal(), SlackSig: sec.SlackSigningSecret.Reveal()})
	if err != nil {
		return nil, fmt.Errorf("seal channel %s: %w", c.ID, err)
	}
	defer clear(plain)
	b, err := s.keys.Seal(plain, channelAAD(c.OrganizationID, c.ID))
	if err != nil {
		return nil, fmt.Errorf("seal channel %s: %w", c.ID, err)
	}
	return b, nil
}

func (s *Service) open(c *toolplane.NotificationChannel) (toolplane.ChannelSecrets, error) {
	if len(c.Secret) == 0 {
		return toolplane.ChannelSecrets{}, nil
	}
	plain, err := s.keys.Open(c.Secret, channelAAD(c.OrganizationID, c.ID))
	if err != nil {
		return toolplane.ChannelSecrets{}, fmt.Errorf("open channel %s: %w", c.ID, err)
	}
	defer clear(plain)
	var p plainChannelSecrets
	if err := json.Unmarshal(plain, &p); err != nil {
		return toolplane.ChannelSecrets{}, fmt.Errorf("open channel %s: the sealed value is not a secrets object", c.ID)
	}
	return toolplane.ChannelSecrets{HMACKey: toolplane.SecretString(p.HMACKey), SlackURL: toolplane.SecretString(p.SlackURL),
		Password: toolplane.SecretString(p.Password), SlackBotToken: toolplane.SecretString(p.SlackBot),
		SlackSigningSecret: toolplane.SecretString(p.SlackSig)}, nil
}

// maxName bounds a channel's name and group.
const maxName = 128

// check refuses a channel that could not deliver: what each kind needs is
// there and well formed. Its errors never quote a secret.
func check(n NewChannel) error {
	bad := func(why string) error { return fmt.Errorf("%w: %s", ErrChannel, why) }
	if n.Name == "" || len(n.Name) > maxName || len(n.Group) > maxName || strings.ContainsAny(n.Name+n.Group, "\r\n\x00") {
		return bad("a name of 1 to 128 characters on one line is required, and a group of at most 128")
	}
	switch n.Kind {
	case toolplane.ChannelWebhook:
		if err := checkURL(n.Config.URL); err != nil {
			return bad("url: " + err.Error())
		}
		if len(n.Secrets.HMACKey.Reveal()) < 32 {
			return bad("a webhook needs an hmac_key of at least 32 characters")
		}
	case toolplane.ChannelSlack:
		if err := checkSlack(n); err != nil {
			return bad(err.Error())
		}
	case toolplane.ChannelEmail:
		c := n.Config
		if c.Host == "" || strings.ContainsAny(c.Host, "/:\r\n ") || c.Port < 1 || c.Port > 65535 {
			return bad("an email channel needs a host name and a port")
		}
		if _, err := mail.ParseAddress(c.From); err != nil || strings.ContainsAny(c.From, "\r\n") {
			return bad("from is not an address")
		}
		if len(c.To) == 0 {
			return bad("an email channel needs at least one address in to")
		}
		for _, to := range c.To {
			if a, err := mail.ParseAddress(to); err != nil || a.Address != to {
				return bad("to holds something that is not a bare address")
			}
		}
		if c.Insecure && !egress.LoopbackHost(c.Host) {
			return bad("insecure (no STARTTLS) is allowed for a loopback SMTP server only")
		}
		if n.Secrets.Password != "" && c.Username == "" {
			return bad("a password needs a username")
		}
	default:
		return bad("kind must be webhook, slack or email")
	}
	return nil
}

// resolveWithin bounds the name resolution of a channel's host at
// creation.
const resolveWithin = 5 * time.Second

// checkDestination refuses a channel whose host egress refuses: an
// address (in any spelling) that is not public and not in the operator's
// allowed ranges, or a name resolving to one. A name that does not
// resolve now is not refused: DNS may not know it yet, and every send
// resolves and checks it again, which is also what catches a name that
// changes its answer after this check. The error names the field and the
// rule, never a Slack URL's secret path.
func (s *Service) checkDestination(ctx context.Context, n NewChannel) error {
	var field, host string
	switch n.Kind {
	case toolplane.ChannelWebhook:
		field, host = "config.url", urlHost(n.Config.URL)
	case toolplane.ChannelSlack:
		if n.Secrets.SlackBotToken != "" {
			// The Web API's address is the operator's (Config.SlackAPI),
			// not the channel's.
			return nil
		}
		field, host = "secrets.slack_url", urlHost(n.Secrets.SlackURL.Reveal())
	case toolplane.ChannelEmail:
		field, host = "config.host", n.Config.Host
	default:
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, resolveWithin)
	defer cancel()
	var re *egress.RefusedError
	if err := s.dest.CheckName(ctx, host); errors.As(err, &re) {
		// The refusal's text, not the refusal itself: it is the
		// channel that is not valid, not the caller who is forbidden.
		return fmt.Errorf("%w: %s: the destination is not allowed: %s (an operator admits an internal receiver with toolplane serve --notify-allow-cidr)",
			ErrChannel, field, re.Error())
	}
	return nil
}

// urlHost answers the host of a URL check accepted, without its port.
func urlHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return fmt.Errorf("not an http(s) URL without credentials")
	}
	return nil
}
