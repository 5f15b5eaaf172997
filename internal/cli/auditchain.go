package cli

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/auditchain"
)

// ErrChainBroken: a verification found a broken link; the command prints
// the report and exits non-zero.
var ErrChainBroken = errors.New("the audit chain is broken")

var verifyColumns = []string{"@reports", "organization_id", "ok", "from", "to", "events", "anchor", "checkpoints", "matched", "break.kind", "break.seq", "break.detail"}

// newAuditVerifyCmd verifies an audit chain: online, the caller's
// organization's as the server has it (GET /v1/audit/verify); offline,
// an export (JSON Lines of events) against the operator's published keys.
func newAuditVerifyCmd(a *app) *cobra.Command {
	var from, to int64
	var file, keysFile, cpFile string
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "verify the audit trail's hash chain and signed checkpoints, naming the first broken link (auditor)",
		Long: `Verify the audit trail's hash chain and its signed checkpoints, and name
the first broken link and how it broke: changed, deleted, reordered,
inserted, forged_checkpoint or rewritten.

Online (the default) the server verifies the caller's organization's chain
(GET /v1/audit/verify, auditor role). --from and --to are sequence numbers.

Offline, --file reads an export, one audit event (JSON) a line, and --keys
the operator's public keys as published at /.well-known/toolplane-audit-keys
(or a key file); --checkpoints, a file of checkpoints one a line, lets the
checkpoints be checked too. The exit status is 1 when a link is broken.`,
		Args: exactArgs(0, "no arguments"),
	}
	r := addRemote(a, cmd)
	out := addOutput(cmd, verifyColumns...)
	cmd.Flags().Int64Var(&from, "from", 0, "the first sequence number to verify (default: the first stored)")
	cmd.Flags().Int64Var(&to, "to", 0, "the last sequence number to verify (default: the last)")
	cmd.Flags().StringVar(&file, "file", "", "verify this export (JSON Lines of audit events) offline instead of asking the server")
	cmd.Flags().StringVar(&keysFile, "keys", "", "with --file: the operator's public audit keys (JSON, as published)")
	cmd.Flags().StringVar(&cpFile, "checkpoints", "", "with --file: a file of signed checkpoints, one JSON a line")
	cmd.RunE = action(func(cmd *cobra.Command, _ []string) error {
		if err := out.check(); err != nil {
			return err
		}
		var reports []auditchain.Report
		if file == "" {
			if keysFile != "" || cpFile != "" {
				return usageErr("--keys and --checkpoints go with --file")
			}
			t, err := r.resolve(cmd)
			if err != nil {
				return err
			}
			path := "/v1/audit/verify" + query("from", seqArg(from), "to", seqArg(to))
			data, err := t.call(cmd.Context(), "GET", path, nil, "")
			if err != nil {
				return err
			}
			var rep auditchain.Report
			if err := json.Unmarshal(data, &rep); err != nil {
				return fmt.Errorf("the answer of %s is not a verification: %w", t.server, err)
			}
			reports = append(reports, rep)
		} else {
			if keysFile == "" {
				return usageErr("--file needs --keys, the operator's public audit keys")
			}
			var err error
			if reports, err = verifyFile(file, keysFile, cpFile, from, to); err != nil {
				return err
			}
		}
		data, err := json.Marshal(map[string]any{"reports": reports})
		if err != nil {
			return err
		}
		if err := out.print(a.stdout, data); err != nil {
			return err
		}
		for _, rep := range reports {
			if !rep.OK {
				return fmt.Errorf("%w: organization %s, %s at %d: %s", ErrChainBroken, rep.OrganizationID, rep.Break.Kind, rep.Break.Seq, rep.Break.Detail)
			}
		}
		return nil
	})
	return cmd
}

func seqArg(n int64) string {
	if n == 0 {
		return ""
	}
	return strconv.FormatInt(n, 10)
}

// verifyFile verifies the events of file, organization by organization,
// each in sequence order. An export is at least once (a batch sent again
// may be in two files, several nodes write out of order), so an event
// written twice, the same in every field, counts once; two lines of one
// number that differ are both kept, for Verify to name.
func verifyFile(file, keysFile, cpFile string, from, to int64) ([]auditchain.Report, error) {
	keys, err := auditchain.LoadKeys(keysFile)
	if err != nil {
		return nil, err
	}
	evs, err := decodeEvents(file)
	if err != nil {
		return nil, err
	}
	byOrg := map[string][]toolplane.AuditEvent{}
	var orgs []string
	if len(evs) > 0 && from <= 0 && to <= 0 && !slices.ContainsFunc(evs, func(e toolplane.AuditEvent) bool {
		return e.OrganizationID != evs[0].OrganizationID
	}) {
		// One organization's export, whole: its events as they are.
		orgs, byOrg[evs[0].OrganizationID] = []string{evs[0].OrganizationID}, evs
	} else {
		for i := range evs {
			e := &evs[i]
			if (from > 0 && e.Seq < from) || (to > 0 && e.Seq > to) {
				continue
			}
			if _, ok := byOrg[e.OrganizationID]; !ok {
				orgs = append(orgs, e.OrganizationID)
			}
			byOrg[e.OrganizationID] = append(byOrg[e.OrganizationID], *e)
		}
	}
	cps := map[string][]toolplane.AuditCheckpoint{}
	if cpFile != "" {
		err := eachLine(cpFile, func(line []byte) error {
			var cp toolplane.AuditCheckpoint
			if err := json.Unmarshal(line, &cp); err != nil {
				return err
			}
			cps[cp.OrganizationID] = append(cps[cp.OrganizationID], cp)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	for org, evs := range byOrg {
		byOrg[org] = inSequence(evs)
	}
	reports := make([]auditchain.Report, 0, len(orgs))
	for _, org := range orgs {
		// An export may hold a range: its first event's predecessor is
		// vouched for by a checkpoint when one is given, else taken on
		// trust, which the report says.
		rep := auditchain.Verify(auditchain.Input{Events: byOrg[org], Checkpoints: cps[org], Keys: keys, Partial: true})
		rep.OrganizationID = org
		reports = append(reports, rep)
	}
	return reports, nil
}

// eachLine calls fn with each non-empty line of file.
func eachLine(file string, fn func([]byte) error) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		if err := fn(sc.Bytes()); err != nil {
			return fmt.Errorf("%s line %d: %w", file, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	return nil
}

// maxLine is the longest line an export may have, as eachLine reads it.
const maxLine = 16 << 20

// batchLines is how many lines a decoding worker takes at once.
const batchLines = 512

// decodeEvents decodes file's events (one a non-empty line, a final "\r"
// dropped, as eachLine reads them), in the order of its lines, on every
// core: decoding, not hashing, is what offline verification costs. It
// answers the same events and the same error (the first bad line's) as
// eachLine decoding line after line.
func decodeEvents(file string) ([]toolplane.AuditEvent, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	type line struct {
		n    int // the line's number in the file
		text []byte
	}
	var lines []line
	var tooLong bool
	for n := 1; len(data) > 0; n++ {
		text := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			text, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if len(text) >= maxLine {
			tooLong = true // where eachLine's reading stops
			break
		}
		text = bytes.TrimSuffix(text, []byte("\r"))
		if len(text) > 0 {
			lines = append(lines, line{n, text})
		}
	}
	evs := make([]toolplane.AuditEvent, len(lines))
	errs := make([]error, (len(lines)+batchLines-1)/batchLines)
	work := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for b := range work {
				for i := b * batchLines; i < min(len(lines), (b+1)*batchLines); i++ {
					if err := auditchain.DecodeEvent(lines[i].text, &evs[i]); err != nil {
						errs[b] = fmt.Errorf("%s line %d: %w", file, lines[i].n, err)
						break
					}
				}
			}
		})
	}
	for b := range errs {
		work <- b
	}
	close(work)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	if tooLong {
		return nil, fmt.Errorf("read %s: %w", file, bufio.ErrTooLong)
	}
	return evs, nil
}

// newAuditKeygenCmd adds a fresh signing key to a key file (making the
// file when there is none): the newest key signs from the server's next
// start, the older ones still verify what they signed.
func newAuditKeygenCmd(a *app) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "keygen",
		Short: "add a fresh Ed25519 audit signing key to a key file (rotation: the newest signs, the older still verify)",
		Args:  exactArgs(0, "no arguments"),
	}
	cmd.Flags().StringVar(&file, "file", "audit-signing-keys.json", "the key file (serve --audit-signing-key)")
	cmd.RunE = action(func(cmd *cobra.Command, _ []string) error {
		ks, err := auditchain.LoadKeys(file)
		switch {
		case errors.Is(err, os.ErrNotExist):
			ks = &auditchain.KeySet{}
		case err != nil:
			return err
		}
		k, err := ks.Generate(time.Now())
		if err != nil {
			return err
		}
		if err := auditchain.SaveKeys(file, ks); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "added key %s to %s (%d keys); restart the server to sign with it\n", k.ID, file, len(ks.Keys))
		return nil
	})
	return cmd
}

// inSequence answers evs in sequence order with repeats of one event (the
// same number, hash and digest) dropped.
func inSequence(evs []toolplane.AuditEvent) []toolplane.AuditEvent {
	slices.SortStableFunc(evs, func(a, b toolplane.AuditEvent) int { return cmp.Compare(a.Seq, b.Seq) })
	out := evs[:0]
	for i := range evs {
		if n := len(out); n > 0 && same(&out[n-1], &evs[i]) {
			continue
		}
		out = append(out, evs[i])
	}
	return out
}

// same reports whether a and b are one event written twice.
func same(a, b *toolplane.AuditEvent) bool {
	return a.Seq == b.Seq && a.ID == b.ID && bytes.Equal(a.Hash, b.Hash) && bytes.Equal(auditchain.Digest(a), auditchain.Digest(b))
}
