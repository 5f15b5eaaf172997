package cli

import (
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolplane/toolplane/webhook"
)

// maxVerifyBody bounds the body verify reads: a callback's body is a
// bounded result, far below it.
const maxVerifyBody = 16 << 20

func newWebhooksCmd(a *app) *cobra.Command {
	rotate := apiCmd(a, "rotate-secret", "make a new callback signing secret and print it, once; the previous one keeps signing for the grace period (platform_admin)",
		exactArgs(0, "no arguments"), nil,
		func(*cobra.Command, []string) (request, error) {
			return request{method: "POST", path: "/v1/webhook-secret:rotate"}, nil
		})
	rotate.Long = `rotate-secret makes a new callback signing secret for your organization and
prints it: the only time it is shown. Capture it straight into a file your
receiver reads, for example:

  toolplane webhooks rotate-secret -o field=secret > callback-secret.txt

Until previous_valid_until the previous secret signs beside the new one (two
v1= entries in X-Toolplane-Signature), so a receiver holding either accepts
every request while you update it.`
	show := apiCmd(a, "secret", "show when the callback signing secret was made and until when the previous one signs, never the secret (platform_admin or auditor)",
		exactArgs(0, "no arguments"), nil,
		func(*cobra.Command, []string) (request, error) {
			return request{method: "GET", path: "/v1/webhook-secret"}, nil
		})
	return group(&cobra.Command{Use: "webhooks", Short: "signed callbacks: verify one, and the signing secret"},
		newVerifyCmd(a), rotate, show)
}

func newVerifyCmd(a *app) *cobra.Command {
	var (
		bodyFile, timestamp, signature string
		secretFiles, secretEnvs        []string
		headers                        []string
		tolerance                      time.Duration
		at                             string
	)
	cmd := &cobra.Command{
		Use:   "verify (--secret-file FILE | --secret-env VAR) (--timestamp TS --signature SIG | --header 'NAME: VALUE'...) [--body-file FILE]",
		Short: "check a signed callback's signature and timestamp, offline; exit 0 when valid",
		Long: `verify checks a request toolplane signed, as a receiver does: the
X-Toolplane-Timestamp and X-Toolplane-Signature headers well formed, the
timestamp within --tolerance of now (either way), and a v1= entry of the
signature the HMAC-SHA256 of "<timestamp>.<body>" under one of the secrets.

The body is read raw, byte for byte, from --body-file or standard input: the
bytes as received, not reformatted JSON (a trailing newline counts). The
secret comes from a file (--secret-file) or an environment variable named by
--secret-env, never from the command line; give several during a rotation.

It prints "valid" and exits 0, or prints "invalid: CHECK" (malformed, stale,
signature) and exits 1. It remembers nothing between runs, so it cannot
refuse a replay within the window: a receiver does that by keeping the
X-Toolplane-Delivery values it accepted (the Go verifier, webhook.Verifier,
does).`,
		Args: exactArgs(0, "no arguments"),
	}
	f := cmd.Flags()
	f.StringVar(&bodyFile, "body-file", "", "a file holding the raw body (default: standard input)")
	f.StringArrayVar(&secretFiles, "secret-file", nil, "a file holding a secret, one trailing newline dropped (repeatable)")
	f.StringArrayVar(&secretEnvs, "secret-env", nil, "the environment variable holding a secret (repeatable)")
	f.StringVar(&timestamp, "timestamp", "", "the X-Toolplane-Timestamp value")
	f.StringVar(&signature, "signature", "", "the X-Toolplane-Signature value")
	f.StringArrayVar(&headers, "header", nil, "a request header line, 'Name: value' (repeatable); X-Toolplane-Timestamp and X-Toolplane-Signature are read from them")
	f.DurationVar(&tolerance, "tolerance", webhook.DefaultTolerance, "how far the timestamp may be from now, either way")
	f.StringVar(&at, "at", "", "check as of this moment instead of now (Unix seconds or RFC 3339): for a request recorded earlier")
	cmd.RunE = action(func(cmd *cobra.Command, _ []string) error {
		if tolerance <= 0 {
			return usageErr("--tolerance: want a positive duration, got %s", tolerance)
		}
		h := http.Header{}
		for _, line := range headers {
			name, value, ok := strings.Cut(line, ":")
			if !ok || strings.TrimSpace(name) == "" {
				return usageErr("--header %q: want 'Name: value'", line)
			}
			h.Add(textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(name)), strings.TrimSpace(value))
		}
		for flag, v := range map[string]string{"timestamp": timestamp, "signature": signature} {
			if v == "" {
				continue
			}
			name := map[string]string{"timestamp": webhook.HeaderTimestamp, "signature": webhook.HeaderSignature}[flag]
			if h.Get(name) != "" {
				return usageErr("--%s and a --header %s: give one", flag, name)
			}
			h.Set(name, v)
		}
		if h.Get(webhook.HeaderTimestamp) == "" || h.Get(webhook.HeaderSignature) == "" {
			return usageErr("give the request's timestamp and signature: --timestamp and --signature, or --header lines")
		}
		secrets, err := verifySecrets(a, secretFiles, secretEnvs)
		if err != nil {
			return err
		}
		defer func() {
			for _, s := range secrets {
				clear(s)
			}
		}()
		now := time.Now()
		if at != "" {
			if now, err = parseAt(at); err != nil {
				return err
			}
		}
		var in io.Reader = cmd.InOrStdin()
		if bodyFile != "" {
			file, err := os.Open(bodyFile)
			if err != nil {
				return usageErr("--body-file: %v", err)
			}
			defer file.Close()
			in = file
		}
		body, err := io.ReadAll(io.LimitReader(in, maxVerifyBody+1))
		if err != nil {
			return fmt.Errorf("read the body: %w", err)
		}
		if len(body) > maxVerifyBody {
			return usageErr("the body is larger than %d bytes", maxVerifyBody)
		}
		err = webhook.Check(secrets, h.Get(webhook.HeaderTimestamp), h.Get(webhook.HeaderSignature), body, now, tolerance)
		if err != nil {
			fmt.Fprintf(a.stdout, "invalid: %s\n", webhook.CheckName(err))
			return &exitError{code: 1, err: err}
		}
		_, err = fmt.Fprintln(a.stdout, "valid")
		return err
	})
	return cmd
}

// verifySecrets reads every secret verify was pointed at, at least one.
func verifySecrets(a *app, files, envs []string) ([][]byte, error) {
	var out [][]byte
	for _, name := range envs {
		v := a.getenv(name)
		if v == "" {
			return nil, usageErr("--secret-env: $%s is not set or empty", name)
		}
		out = append(out, []byte(v))
	}
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, usageErr("--secret-file: %v", err)
		}
		b = []byte(strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"))
		if len(b) == 0 {
			return nil, usageErr("--secret-file: %s is empty", path)
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		return nil, usageErr("give the secret with --secret-file FILE or --secret-env VAR (never on the command line)")
	}
	return out, nil
}

// parseAt reads --at: Unix seconds or RFC 3339.
func parseAt(s string) (time.Time, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(n, 0), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, usageErr("--at %q: want Unix seconds or an RFC 3339 time", s)
	}
	return t, nil
}
