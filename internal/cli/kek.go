package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/notify"
	"github.com/toolplane/toolplane/secret"
	"github.com/toolplane/toolplane/signing"
)

func newRotateKEKCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rotate-kek",
		Short: "seal every connection secret under the keyring's new current key-encryption key (offline, opens --database; not an API key)",
		Long: `rotate-kek re-wraps the data key of every connection secret (and of every notification
channel's secret) in the database
under the keyring's current key-encryption key (KEK), across every
organization. It is not about API keys: it opens the database itself
(--database, as serve does) and needs no server and no API key.

The keyring comes from --kek-file or, without it, $TOOLPLANE_KEK: one
"<id> <base64 key>" a line, the NEW key first (the current one), then
every older key secrets may still be sealed under. Rotate in this order:
give every node the ring (new key first) and restart them, run rotate-kek,
and only once it reports no failure drop the old keys from the ring.

It is safe while nodes serve: each write is conditional on the version it
read. Running it again finishes what a failed run left.`,
		Args: exactArgs(0, "no arguments"),
	}
	database := databaseFlag(cmd.Flags())
	var kekFile string
	cmd.Flags().StringVar(&kekFile, "kek-file", "", "the keyring file, readable by its owner only (default: $TOOLPLANE_KEK holds the keyring)")
	out := addOutput(cmd)
	cmd.RunE = action(func(cmd *cobra.Command, _ []string) error {
		if err := out.check(); err != nil {
			return err
		}
		env := a.getenv("TOOLPLANE_KEK")
		if kekFile != "" {
			// The flag names the ring this run means; a variable left in
			// the environment does not make it ambiguous.
			env = ""
		}
		ring, err := secret.LoadKeyring(env, kekFile)
		if err != nil {
			return fmt.Errorf("rotate-kek: %w", err)
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), time.Hour)
		defer cancel()
		b, err := backend.Open(ctx, *database)
		if err != nil {
			return err
		}
		defer b.Close()
		missing := &missingKeys{Handler: slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})}
		report, err := secret.RewrapAll(ctx, b.Store, ring, slog.New(missing))
		// Notification channels' secrets are sealed under the same ring,
		// and go with the connections'.
		channels, cerr := notify.RewrapChannels(ctx, b.Store, ring, slog.New(missing))
		err = worse(err, cerr)
		// So are the organizations' callback signing secrets.
		signers, werr := signing.Rewrap(ctx, b.Store, ring, slog.New(missing))
		err = worse(err, werr)
		if perr := printValue(a, out, map[string]any{
			"database": b.Kind + " " + b.Where, "current_key": ring.Current(),
			"rewrapped": report.Rewrapped, "current": report.Current, "empty": report.Empty, "gone": report.Gone, "failed": report.Failed,
			"channels_rewrapped": channels.Rewrapped, "channels_failed": channels.Failed,
			"webhook_secrets_rewrapped": signers.Rewrapped, "webhook_secrets_failed": signers.Failed,
		}); perr != nil {
			return perr
		}
		// What is left under an old key is told as one count, connections
		// and channels alike: either keeps the old key in the ring.
		report.Failed += channels.Failed + signers.Failed
		switch {
		case errors.Is(err, secret.ErrIncomplete):
			return incomplete(report, ring, missing.ids())
		case err != nil:
			return fmt.Errorf("rotate-kek: %w; nothing is lost: keep the old keys in the ring and run it again", err)
		}
		return nil
	})
	return cmd
}

// worse answers the error of two steps that says more: a failure over
// an incomplete rewrap (which running again finishes), either over none.
func worse(a, b error) error {
	if a == nil || (errors.Is(a, secret.ErrIncomplete) && b != nil && !errors.Is(b, secret.ErrIncomplete)) {
		return b
	}
	return a
}

// incomplete answers what to do after a run that left connections under
// an old key.
func incomplete(r secret.Report, ring *secret.Keyring, missing []string) error {
	if len(missing) > 0 {
		return fmt.Errorf("%d connection, notification channel or callback signing secret(s) could not be rewrapped: they are sealed under key(s) %s, which the keyring (%s) does not hold. "+
			"Add those keys to the keyring after the new current key %s and run rotate-kek again; remove no key from any node's ring until it reports no failure",
			r.Failed, strings.Join(missing, ", "), strings.Join(ring.IDs(), ", "), ring.Current())
	}
	return fmt.Errorf("%d connection, notification channel or callback signing secret(s) could not be rewrapped (each is named above); keep the old keys in every node's ring and run rotate-kek again", r.Failed)
}

// missingKeys is a log handler that also collects the ids of the keys a
// rewrap failed for want of, from the errors it is told of. RewrapAll
// logs through it as it is, never a handler derived by WithAttrs.
type missingKeys struct {
	slog.Handler
	mu   sync.Mutex
	seen []string
}

func (m *missingKeys) Handle(ctx context.Context, r slog.Record) error {
	r.Attrs(func(at slog.Attr) bool {
		var unknown *secret.UnknownKeyError
		if err, ok := at.Value.Any().(error); ok && errors.As(err, &unknown) {
			m.mu.Lock()
			if !slices.Contains(m.seen, unknown.ID) {
				m.seen = append(m.seen, unknown.ID)
			}
			m.mu.Unlock()
		}
		return true
	})
	return m.Handler.Handle(ctx, r)
}

// ids answers the missing keys' ids, sorted.
func (m *missingKeys) ids() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Clone(m.seen)
	slices.Sort(out)
	return out
}
