package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/toolplane/toolplane/ceiling"
)

var vendorCeilingColumns = []string{"provider", "account_limit", "arithmetic.sum", "version", "updated_by", "updated_at"}

func newVendorsCmd(a *app) *cobra.Command {
	return group(&cobra.Command{Use: "vendors", Short: "vendor accounts: the concurrency ceiling the platform's lanes are checked against"},
		newCeilingCmd(a))
}

func newCeilingCmd(a *app) *cobra.Command {
	var (
		limit   int64
		version int64
		lanes   []string
		note    string
		file    string
	)
	set := ceilingCmd(a, "set PROVIDER (--account-limit N [--lane NAME=RUNS:SHAPE]... | --file FILE)",
		"set a vendor account's limit and the lanes whose runs call it; refused, naming each lane's product, when they can exceed it (platform_admin)",
		exactArgs(1, "PROVIDER"), func(cmd *cobra.Command, args []string) (request, error) {
			in := ceiling.Input{}
			if file != "" {
				if cmd.Flags().Changed("account-limit") || len(lanes) > 0 || cmd.Flags().Changed("note") {
					return request{}, usageErr("--file holds the whole ceiling: give it alone, or --account-limit and --lane")
				}
				var err error
				if in, err = readCeilingFile(file); err != nil {
					return request{}, err
				}
			} else {
				if !cmd.Flags().Changed("account-limit") {
					return request{}, usageErr("give --account-limit (how many calls the vendor account accepts at once), or --file")
				}
				in.AccountLimit, in.Note = limit, note
				for _, text := range lanes {
					l, err := ceiling.ParseLane(text)
					if err != nil {
						return request{}, usageErr("--lane %q: %v", text, err)
					}
					in.Lanes = append(in.Lanes, l)
				}
			}
			if cmd.Flags().Changed("version") {
				in.Version = version
			}
			return request{method: "PUT", path: "/v1/vendor-ceilings/" + esc(args[0]), body: in}, nil
		})
	set.Long = `set records, for one vendor account, how many calls it accepts at once and the
lanes of your agent platform whose runs call it, and checks the sum

  each lane's active run limit × the most calls to the vendor one run makes at once

against the account limit. A ceiling whose lanes can exceed it is refused,
naming every lane's product and the sum, and nothing is stored. It is a
review of your configuration, run whenever either number changes; toolplane
holds no limiter across runs.

A lane is NAME=RUNS:SHAPE, its shape in this form:

  call(PROVIDER[,FANOUT])   a call, FANOUT at once (a wide node; default 1)
  seq(A,B,...)              one after another: the largest part counts
  branch(A,B,...)           one of them: the largest part counts
  par(A,B,...)              all at once: the parts add

A child run is not part of its parent's shape: give it a lane of its own.

  toolplane vendors ceiling set exa --account-limit 100 \
    --lane 'interactive=20:par(call(exa,3),call(exa,3))' \
    --lane 'batch=5:seq(call(exa,10),call(fullenrich,40))'

--file reads the whole ceiling as the API takes it, JSON or YAML
(account_limit, lanes, note). --version makes the change only from that
version, so two people editing at once do not lose one another's change.`
	f := set.Flags()
	f.Int64Var(&limit, "account-limit", 0, "how many calls the vendor account accepts at once")
	f.StringArrayVar(&lanes, "lane", nil, "a lane, NAME=RUNS:SHAPE (repeatable)")
	f.StringVar(&note, "note", "", "where the numbers come from (the vendor's plan, the platform's configuration)")
	f.StringVar(&file, "file", "", "a JSON or YAML file holding the ceiling (account_limit, lanes, note)")
	f.Int64Var(&version, "version", 0, "change it only from this version")

	show := ceilingCmd(a, "show PROVIDER", "show a vendor ceiling and its arithmetic, lane by lane (platform_admin or auditor)",
		exactArgs(1, "PROVIDER"), func(_ *cobra.Command, args []string) (request, error) {
			return request{method: "GET", path: "/v1/vendor-ceilings/" + esc(args[0])}, nil
		})
	list := apiCmd(a, "list", "list the vendor ceilings with their sums (platform_admin or auditor)", exactArgs(0, "no arguments"), vendorCeilingColumns,
		func(*cobra.Command, []string) (request, error) {
			return request{method: "GET", path: "/v1/vendor-ceilings"}, nil
		})
	var delVersion int64
	del := apiCmd(a, "delete PROVIDER", "delete a vendor ceiling (platform_admin)", exactArgs(1, "PROVIDER"), nil,
		func(_ *cobra.Command, args []string) (request, error) {
			path := "/v1/vendor-ceilings/" + esc(args[0])
			if delVersion != 0 {
				path += fmt.Sprintf("?version=%d", delVersion)
			}
			return request{method: "DELETE", path: path}, nil
		})
	del.Flags().Int64Var(&delVersion, "version", 0, "delete it only from this version")
	return group(&cobra.Command{Use: "ceiling", Short: "a vendor account's concurrency limit and the lanes whose runs call it"},
		set, show, list, del)
}

// ceilingCmd is apiCmd for an answer holding one ceiling, whose table is
// the ceiling's lanes and arithmetic rather than a field per line.
func ceilingCmd(a *app, use, short string, args cobra.PositionalArgs, build func(cmd *cobra.Command, args []string) (request, error)) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: args}
	r := addRemote(a, cmd)
	out := addOutput(cmd)
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		if err := out.check(); err != nil {
			return err
		}
		req, err := build(cmd, args)
		if err != nil {
			return err
		}
		data, err := r.call(cmd, req.method, req.path, req.body, req.contentType)
		if err != nil {
			return err
		}
		warn(a.stderr, data)
		if out.format != "table" {
			return out.print(a.stdout, data)
		}
		return printCeiling(a.stdout, data)
	})
	return cmd
}

// printCeiling writes a ceiling for people: its account limit, each lane
// with its shape in the text form --lane takes and its product, and the
// sum.
func printCeiling(w io.Writer, data []byte) error {
	var answer struct {
		VendorCeiling ceiling.View `json:"vendor_ceiling"`
	}
	if err := json.Unmarshal(data, &answer); err != nil {
		return fmt.Errorf("the answer is not a vendor ceiling: %w", err)
	}
	v := answer.VendorCeiling
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "provider:\t%s\n", v.Provider)
	fmt.Fprintf(tw, "account limit:\t%d\n", v.AccountLimit)
	fmt.Fprintf(tw, "version:\t%d (%s, %s)\n", v.Version, v.UpdatedBy, v.UpdatedAt.Format("2006-01-02T15:04:05Z07:00"))
	if v.Note != "" {
		fmt.Fprintf(tw, "note:\t%s\n", strings.ReplaceAll(v.Note, "\n", " "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(v.Lanes) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "LANE\tRUNS\tCALLS\tPRODUCT\tSHAPE")
		for i, l := range v.Lanes {
			var p ceiling.Product
			if i < len(v.Arithmetic.Lanes) {
				p = v.Arithmetic.Lanes[i]
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", l.Name, l.ActiveRuns, p.Calls, p.Product, ceiling.Format(l.Shape))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	_, err := fmt.Fprintln(w, v.Arithmetic.String())
	return err
}

// readCeilingFile reads a ceiling as the API takes it from a JSON or YAML
// file, refusing a field the API does not know.
func readCeilingFile(path string) (ceiling.Input, error) {
	var in ceiling.Input
	b, err := os.ReadFile(path)
	if err != nil {
		return in, usageErr("--file: %v", err)
	}
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		return in, usageErr("--file %s: %v", path, err)
	}
	j, err := json.Marshal(v)
	if err != nil {
		return in, usageErr("--file %s: %v", path, err)
	}
	d := json.NewDecoder(bytes.NewReader(j))
	d.DisallowUnknownFields()
	if err := d.Decode(&in); err != nil {
		return in, usageErr("--file %s: %v", path, err)
	}
	return in, nil
}
