package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// build is one toolplane a run measures: started by the run (tp set) or
// given by -url.
type build struct {
	label                               string
	baseURL, key, httpKey, federatedKey string
	tp                                  *Toolplane
	targets                             map[string]Target
}

// pid answers the toolplane's process id, or zero when this run did not
// start it.
func (b *build) pid() int {
	if b.tp == nil {
		return 0
	}
	return b.tp.PID()
}

// startBuild starts binary (empty: built from src) with serveArgs and
// serveEnv and gives it what targets need: a key for the federated
// endpoint, the http tools' connection and grant.
func startBuild(ctx context.Context, binary, src string, serveArgs, serveEnv, targets []string, httpTools bool, apiToken, federatedKey string, federatedGrant []string) (_ *build, err error) {
	tp, err := StartToolplane(ctx, ToolplaneOptions{Binary: binary, Source: src, Args: serveArgs, Env: serveEnv})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			tp.Stop()
		}
	}()
	b := &build{baseURL: tp.URL, key: tp.AgentKey, federatedKey: federatedKey, tp: tp}
	if slices.Contains(targets, TargetFederated) && b.federatedKey == "" {
		if b.federatedKey, err = MintAgentKey(ctx, tp.URL, tp.AdminKey, "toolplane-load", federatedGrant); err != nil {
			return nil, err
		}
	}
	if httpTools {
		if b.httpKey, err = SetUpHTTPTools(ctx, tp.URL, tp.AdminKey, apiToken); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// errCompare is what parseCompare answers for a value it cannot use.
var errCompare = errors.New("-compare takes two toolplane binaries, A,B")

// parseCompare answers the two binaries of -compare A,B. They may be the
// same file: a build against itself measures the noise floor of the
// ratio.
func parseCompare(s string) ([]string, error) {
	parts := strings.Split(s, ",")
	if len(parts) != 2 {
		return nil, fmt.Errorf("%w: %q has %d", errCompare, s, len(parts))
	}
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
		if parts[i] == "" {
			return nil, fmt.Errorf("%w: %q has an empty one", errCompare, s)
		}
		st, err := os.Stat(parts[i])
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errCompare, err)
		}
		if st.IsDir() {
			return nil, fmt.Errorf("%w: %s is a directory", errCompare, parts[i])
		}
	}
	return parts, nil
}

// cpuNote renders a run's CPU per call by process for the progress
// lines: ", CPU/call toolplane 120 µs + api 31 µs".
func cpuNote(r Result) string {
	if len(r.Processes) == 0 {
		return ""
	}
	parts := make([]string, len(r.Processes))
	for i, p := range r.Processes {
		parts[i] = fmt.Sprintf("%s %d µs", p.Role, p.PerCall.Microseconds())
	}
	return ", CPU/call " + strings.Join(parts, " + ")
}

// ratioPair is one ratio of CPU per call the targets are stated
// in: the processes in roles a of target ta over those in roles b of
// target tb, round by round.
type ratioPair struct {
	label  string
	ta     string
	rolesA []string
	tb     string
	rolesB []string
	// goal says the target by client count, where there is one.
	goal map[int]string
}

// cpuRatioPairs are the ratios CPURatioLines prints. A proxy in front is
// set against the process in front (toolplane alone against the proxy
// alone): the server behind both is the same and costs the same per
// call. On the MCP targets toolplane serves the demo tool itself, while
// the proxy forwards to the plain server that serves it, so toolplane is
// also set against the proxy and the plain server together.
var cpuRatioPairs = []ratioPair{
	{"httpread toolplane ÷ apiproxy Go proxy (processes in front alone)", TargetHTTPRead, []string{RoleToolplane}, TargetAPIProxy, []string{RoleGoProxy},
		map[int]string{1: "≤ 1.5×", 16: "≤ 1.0×"}},
	{"httpread toolplane ÷ apinginx nginx (processes in front alone)", TargetHTTPRead, []string{RoleToolplane}, TargetAPINginx, []string{RoleNginx},
		map[int]string{16: "≤ 3×"}},
	{"apiproxy Go proxy ÷ apinginx nginx", TargetAPIProxy, []string{RoleGoProxy}, TargetAPINginx, []string{RoleNginx}, nil},
	{"httpread toolplane+api ÷ apiproxy Go proxy+api (whole path)", TargetHTTPRead, []string{RoleToolplane, RoleAPI}, TargetAPIProxy, []string{RoleGoProxy, RoleAPI}, nil},
	{"mcp toolplane ÷ proxy Go proxy (processes in front alone)", TargetMCP, []string{RoleToolplane}, TargetProxy, []string{RoleGoProxy},
		map[int]string{1: "≤ 1.2×", 16: "≤ 1.2×"}},
	{"mcp toolplane ÷ proxy Go proxy+plain (toolplane serves the tool itself)", TargetMCP, []string{RoleToolplane}, TargetProxy, []string{RoleGoProxy, RolePlain}, nil},
	{"federated toolplane ÷ proxy Go proxy (processes in front alone)", TargetFederated, []string{RoleToolplane}, TargetProxy, []string{RoleGoProxy},
		map[int]string{1: "≤ 1.2×", 16: "≤ 1.2×"}},
	{"rest toolplane ÷ proxy Go proxy+plain", TargetREST, []string{RoleToolplane}, TargetProxy, []string{RoleGoProxy, RolePlain}, nil},
	{"mcp toolplane ÷ mcpgateway docker/mcp-gateway (processes in front alone)", TargetMCP, []string{RoleToolplane}, TargetMCPGateway, []string{RoleMCPGateway},
		map[int]string{1: "≤ 0.4×", 16: "≤ 0.4×"}},
	{"mcp toolplane ÷ mcpgateway docker/mcp-gateway+plain (toolplane serves the tool itself)", TargetMCP, []string{RoleToolplane}, TargetMCPGateway, []string{RoleMCPGateway, RolePlain}, nil},
	{"federated toolplane ÷ mcpgateway docker/mcp-gateway (processes in front alone; like for like)", TargetFederated, []string{RoleToolplane}, TargetMCPGateway, []string{RoleMCPGateway},
		map[int]string{1: "≤ 0.4×", 16: "≤ 0.4×"}},
	{"federated toolplane+plain ÷ mcpgateway docker/mcp-gateway+plain (whole path)", TargetFederated, []string{RoleToolplane, RolePlain}, TargetMCPGateway, []string{RoleMCPGateway, RolePlain}, nil},
	{"mcpgateway docker/mcp-gateway ÷ proxy Go proxy", TargetMCPGateway, []string{RoleMCPGateway}, TargetProxy, []string{RoleGoProxy}, nil},
}

// CPURatioLines answers, for each ratio of cpuRatioPairs whose two targets
// were measured and each client count, the ratio round by round with its
// median and range, and toolplane's own CPU per call on the write tool;
// runs holds the rounds by "target/clients".
func CPURatioLines(runs map[string][]Result, clients []int) []string {
	var out []string
	key := func(t string, n int) string { return t + "/" + strconv.Itoa(n) }
	for _, p := range cpuRatioPairs {
		for _, n := range clients {
			ratios := CPURatios(runs[key(p.ta, n)], runs[key(p.tb, n)], p.rolesA, p.rolesB)
			if len(ratios) == 0 {
				continue
			}
			line := fmt.Sprintf("- CPU/call, %s, %d client(s): %s", p.label, n, formatRatios(ratios))
			if g, ok := p.goal[n]; ok {
				line += " (target " + g + ")"
			}
			out = append(out, line)
		}
	}
	for _, n := range clients {
		var xs []float64
		for _, r := range runs[key(TargetHTTPWrite, n)] {
			if d, ok := r.RoleCPU(RoleToolplane); ok {
				xs = append(xs, float64(d))
			}
		}
		if len(xs) > 0 {
			line := fmt.Sprintf("- CPU/call, httpwrite toolplane alone, %d client(s): %s µs", n, microseconds(SpreadOf(xs)))
			if n == 16 {
				line += " (target ≤ 200 µs)"
			}
			out = append(out, line)
		}
	}
	return out
}

// runCompare measures the toolplane targets of two builds, cell by cell
// back to back (A then B in odd rounds, B then A in even ones, so neither
// always runs second on a host that drifts), and prints the per-round
// ratios B/A of toolplane's CPU per call, of all the servers' CPU per
// call and of throughput, with their medians and ranges, then each
// build's table. Targets toolplane is not on do not differ between the
// builds and are left out.
func runCompare(ctx context.Context, stdout, stderr io.Writer, builds []*build, targets []string, clients []int, rounds int,
	warmup, duration time.Duration, up *Upstream, api *API, ngx *Nginx) int {
	var measured []string
	for _, t := range targets {
		if needsToolplane([]string{t}) {
			measured = append(measured, t)
		}
	}
	if skipped := len(targets) - len(measured); skipped > 0 {
		fmt.Fprintf(stdout, "-compare: measuring %s; %d target(s) without toolplane left out\n", strings.Join(measured, ", "), skipped)
	}
	// runs[i] holds build i's rounds by "target/clients".
	runs := []map[string][]Result{{}, {}}
	key := func(t string, n int) string { return t + "/" + strconv.Itoa(n) }
	for round := range rounds {
		order := []int{0, 1}
		if round%2 == 1 {
			order = []int{1, 0}
		}
		for _, n := range clients {
			for _, name := range measured {
				for _, i := range order {
					b := builds[i]
					res, err := Run(ctx, b.targets[name], Options{Clients: n, Warmup: warmup, Duration: duration,
						Processes: serverProcesses(name, b.pid(), up, nil, api, ngx)})
					if err != nil {
						fmt.Fprintf(stderr, "toolplane-load: %v\n", err)
						return 1
					}
					fmt.Fprintf(stderr, "round %d: %s %s at %d clients: %.0f calls/s, p50 %s, %d errors%s\n",
						round+1, string(rune('A'+i)), name, n, res.Rate(), ms(res.P50), res.Errors, cpuNote(res))
					runs[i][key(name, n)] = append(runs[i][key(name, n)], res)
					time.Sleep(300 * time.Millisecond)
				}
			}
		}
	}
	fmt.Fprintf(stdout, "\nB ÷ A, round by round (each pair measured back to back, order alternating), then median and range:\n\n")
	for _, n := range clients {
		for _, name := range measured {
			a, b := runs[0][key(name, n)], runs[1][key(name, n)]
			fmt.Fprintf(stdout, "- %s at %d client(s), toolplane CPU/call: %s\n", name, n, formatRatios(CPURatios(b, a, []string{RoleToolplane}, []string{RoleToolplane})))
			fmt.Fprintf(stdout, "- %s at %d client(s), throughput: %s\n", name, n, formatRatios(RateRatios(b, a)))
		}
	}
	for i, b := range builds {
		fmt.Fprintf(stdout, "\n%s:\n\n", b.label)
		var cells []Cell
		for _, n := range clients {
			for _, name := range measured {
				cells = append(cells, Cell{Target: name, Clients: n, Rounds: runs[i][key(name, n)]})
			}
		}
		if err := WriteProcessTable(stdout, cells); err != nil {
			fmt.Fprintf(stderr, "toolplane-load: %v\n", err)
			return 1
		}
	}
	for i := range builds {
		for _, rs := range runs[i] {
			for _, r := range rs {
				if r.FirstError != nil {
					fmt.Fprintf(stdout, "- %s %s at %d clients, first error: %v\n", string(rune('A'+i)), r.Target, r.Clients, r.FirstError)
					break
				}
			}
		}
	}
	return 0
}
