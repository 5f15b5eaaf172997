package loadtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolplane/toolplane/modelname"
)

// The target names Main knows.
const (
	// TargetREST: REST invoke of the demo read tool through toolplane.
	TargetREST = "rest"
	// TargetMCP: tools/call of the same tool through toolplane's /mcp.
	TargetMCP = "mcp"
	// TargetPlain: the same tool on a plain SDK server with no auth; the
	// baseline of TargetMCP, and the upstream the proxy and a federating
	// toolplane forward to (so also the "direct" baseline of both).
	TargetPlain = "plain"
	// TargetProxy: the plain server through a bare httputil.ReverseProxy.
	TargetProxy = "proxy"
	// TargetFederated: the plain server through toolplane's federation;
	// needs -federated.
	TargetFederated = "federated"
	// TargetAPI: GET of an item straight from the JSON API (APIHandler),
	// the direct baseline of TargetHTTPRead.
	TargetAPI = "api"
	// TargetAPIProxy: the same GET through a bare httputil.ReverseProxy
	// in front of the API.
	TargetAPIProxy = "apiproxy"
	// TargetAPINginx: the same GET through nginx as a reverse proxy
	// (a pool of kept-alive connections to the API), a process this run
	// starts; see -nginx and -install-nginx.
	TargetAPINginx = "apinginx"
	// TargetHTTPRead: REST invoke of an http runtime read tool through
	// toolplane, which GETs the same item from the API.
	TargetHTTPRead = "httpread"
	// TargetHTTPWrite: REST invoke of an http runtime write tool, each
	// call with an idempotency key of its own, which POSTs to the API.
	TargetHTTPWrite = "httpwrite"
	// TargetMCPGateway: the plain server through docker/mcp-gateway
	// (`gateway run --transport streaming`, the server a remote one in its
	// catalog), a process this run starts; needs -mcp-gateway.
	TargetMCPGateway = "mcpgateway"
)

var allTargets = []string{TargetREST, TargetMCP, TargetPlain, TargetProxy, TargetFederated, TargetMCPGateway, TargetAPI, TargetAPIProxy, TargetAPINginx, TargetHTTPRead, TargetHTTPWrite}

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// Main is the toolplane-load command: args are its arguments (without the
// program name). It answers the exit code.
//
//	toolplane-load [flags]           measure and print the tables
//	toolplane-load -compare A,B      two toolplane builds in paired rounds
//	toolplane-load upstream [-addr]  serve the plain server and proxy (helper process)
//	toolplane-load proxy -to URL     serve a bare reverse proxy (helper process)
//	toolplane-load api [-addr]       serve the JSON API (helper process)
//	toolplane-load hang [flags]      one hanging downstream beside a healthy one, protections on and off
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "api" {
		fs := flag.NewFlagSet("api", flag.ContinueOnError)
		fs.SetOutput(stderr)
		addr := fs.String("addr", "127.0.0.1:0", "where the JSON API listens")
		hangAddr := fs.String("hang-addr", "", "where, when set, a downstream that accepts every request and never answers listens too")
		if err := fs.Parse(args[1:]); err != nil {
			return 2
		}
		if err := ServeAPIWithHang(ctx, *addr, *hangAddr, stdout); err != nil {
			fmt.Fprintln(stderr, "toolplane-load api:", err)
			return 1
		}
		return 0
	}
	if len(args) > 0 && args[0] == "hang" {
		return MainHang(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "proxy" {
		fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
		fs.SetOutput(stderr)
		addr := fs.String("addr", "127.0.0.1:0", "where the proxy listens")
		to := fs.String("to", "", "the base URL of the server proxied to")
		if err := fs.Parse(args[1:]); err != nil {
			return 2
		}
		if err := ServeProxy(ctx, *addr, *to, stdout); err != nil {
			fmt.Fprintln(stderr, "toolplane-load proxy:", err)
			return 1
		}
		return 0
	}
	if len(args) > 0 && args[0] == "upstream" {
		fs := flag.NewFlagSet("upstream", flag.ContinueOnError)
		fs.SetOutput(stderr)
		addr := fs.String("addr", "127.0.0.1:0", "where the plain MCP server listens")
		if err := fs.Parse(args[1:]); err != nil {
			return 2
		}
		if err := ServeUpstream(ctx, *addr, stdout); err != nil {
			fmt.Fprintln(stderr, "toolplane-load upstream:", err)
			return 1
		}
		return 0
	}

	fs := flag.NewFlagSet("toolplane-load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	duration := fs.Duration("duration", 5*time.Second, "measured time per target and client count")
	warmup := fs.Duration("warmup", time.Second, "calls before the measured time, not counted (sessions, the key cache and the heap settle)")
	clientsFlag := fs.String("clients", "1,16", "comma-separated client counts")
	targetsFlag := fs.String("target", "rest,mcp,plain,proxy", "comma-separated targets: "+strings.Join(allTargets, ", "))
	rounds := fs.Int("rounds", 1, "repeat the whole sweep; each cell reports the round with the median throughput")
	baseURL := fs.String("url", "", "a running toolplane's base URL (serving the demo catalogue); empty builds and starts one")
	key := fs.String("key", os.Getenv("TOOLPLANE_DEMO_AGENT_KEY"), "the agent key for -url (default $TOOLPLANE_DEMO_AGENT_KEY)")
	src := fs.String("src", ".", "the toolplane module to build ./cmd/toolplane from")
	binary := fs.String("binary", "", "a prebuilt toolplane binary to start instead of building one")
	var serveArgs, serveEnv stringList
	fs.Var(&serveArgs, "serve-arg", "an extra argument for `toolplane serve` (repeatable); {upstream} becomes the plain server's MCP URL")
	fs.Var(&serveEnv, "serve-env", "NAME=value added to the started toolplane's environment (repeatable)")
	hosting := fs.String("upstream", "subprocess", "where the plain server, the JSON API and their proxies run: subprocess (helper processes of their own, like toolplane) or inprocess")
	apiAddr := fs.String("api-addr", "127.0.0.1:0", "where the JSON API of the api, apiproxy, httpread and httpwrite targets listens")
	proxyHosting := fs.String("proxy", "own", "with -upstream subprocess, where the proxy runs: own (a process of its own in front of the upstream's, as toolplane is) or shared (in the upstream's process)")
	upstreamAddr := fs.String("upstream-addr", "127.0.0.1:0", "where the plain server listens (fix it to point a toolplane's federation at it)")
	federated := fs.String("federated", "", "toolplane's MCP endpoint for the upstream: a URL, or a path on toolplane's URL such as /mcp/upstreams/plain")
	federatedKey := fs.String("federated-key", "", "the bearer key for -federated (default: with a toolplane this run started, a fresh agent key granting -federated-grant; otherwise -key)")
	federatedGrant := fs.String("federated-grant", "mcp.*", "comma-separated tools (glob patterns) the key minted for -federated grants")
	federatedTool := fs.String("federated-tool", "", "the tool's name on the federated endpoint (default: the upstream's name)")
	arguments := fs.String("arguments", `{"query":"cracked"}`, "the read tool's arguments")
	expect := fs.String("expect", "t-1001", "text every answer must hold to count as a success")
	pprofURL := fs.String("pprof", "", "base URL of the server's net/http/pprof (e.g. http://127.0.0.1:6060); profiles -pprof-targets")
	pprofTargets := fs.String("pprof-targets", TargetREST, "comma-separated targets to profile when -pprof is set")
	pprofDir := fs.String("pprof-dir", ".", "where CPU profiles are written, as <target>-<clients>.pprof")
	nginxPath := fs.String("nginx", "", "the nginx binary of the "+TargetAPINginx+" target (default: nginx on PATH, else "+defaultNginx+")")
	installNginx := fs.Bool("install-nginx", false, "when the "+TargetAPINginx+" target has no nginx, install Debian's (apt-get install -y nginx, or nginx-light; needs root)")
	mcpGatewayPath := fs.String("mcp-gateway", "", "the docker/mcp-gateway binary (docker-mcp) of the "+TargetMCPGateway+" target; "+MCPGatewayHint)
	var mcpGatewayArgs stringList
	fs.Var(&mcpGatewayArgs, "mcp-gateway-arg", "an extra `flag` for the "+TargetMCPGateway+" target's gateway run (repeatable), e.g. --log-calls=false")
	compareFlag := fs.String("compare", "", "A,B: two toolplane binaries, measured cell by cell back to back in alternating order each round; prints B/A of toolplane's CPU per call and of throughput, round by round")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "toolplane-load: "+format+"\n", a...)
		return 1
	}
	clients, err := parseClients(*clientsFlag)
	if err != nil {
		return fail("%v", err)
	}
	targets, err := parseTargets(*targetsFlag)
	if err != nil {
		return fail("%v", err)
	}
	if *rounds < 1 {
		return fail("-rounds must be at least 1")
	}
	if !json.Valid([]byte(*arguments)) {
		return fail("-arguments is not JSON")
	}
	if slices.Contains(targets, TargetFederated) && *federated == "" {
		return fail("the %s target needs -federated", TargetFederated)
	}

	if *baseURL != "" && (slices.Contains(targets, TargetHTTPRead) || slices.Contains(targets, TargetHTTPWrite)) {
		return fail("the %s and %s targets need a toolplane this run starts (no -url)", TargetHTTPRead, TargetHTTPWrite)
	}
	var compare []string
	if *compareFlag != "" {
		if compare, err = parseCompare(*compareFlag); err != nil {
			return fail("%v", err)
		}
		if *baseURL != "" || *binary != "" {
			return fail("-compare starts both builds itself: drop -url and -binary")
		}
		if !needsToolplane(targets) {
			return fail("-compare needs a toolplane target (%s, %s, %s, %s or %s)", TargetREST, TargetMCP, TargetFederated, TargetHTTPRead, TargetHTTPWrite)
		}
	}
	var nginxBin string
	if slices.Contains(targets, TargetAPINginx) {
		if nginxBin, err = FindNginx(*nginxPath); errors.Is(err, ErrNoNginx) && *installNginx && *nginxPath == "" {
			fmt.Fprintln(stderr, "toolplane-load: no nginx; installing Debian's")
			if ierr := InstallNginx(ctx, stderr); ierr != nil {
				return fail("%v", ierr)
			}
			nginxBin, err = FindNginx("")
		}
		if err != nil {
			return fail("the %s target: %v", TargetAPINginx, err)
		}
	}

	var mcpGatewayBin string
	if slices.Contains(targets, TargetMCPGateway) {
		if mcpGatewayBin, err = FindMCPGateway(*mcpGatewayPath); err != nil {
			return fail("the %s target: %v", TargetMCPGateway, err)
		}
	}

	// The upstream comes first, so a started toolplane can be pointed at it.
	var up *Upstream
	if needsUpstream(targets) || slices.ContainsFunc(serveArgs, func(a string) bool { return strings.Contains(a, "{upstream}") }) {
		switch *hosting {
		case "inprocess":
			up, err = StartUpstream(ctx, *upstreamAddr)
		case "subprocess":
			exe, xerr := os.Executable()
			if xerr != nil {
				return fail("find this program to run its upstream helper: %v", xerr)
			}
			up, err = StartUpstreamProcess(ctx, stderr, exe, "upstream", "-addr", *upstreamAddr)
			if err == nil && slices.Contains(targets, TargetProxy) {
				switch *proxyHosting {
				case "own":
					base := strings.TrimSuffix(up.URL, upstreamPath)
					if err = up.UseProxyProcess(ctx, stderr, exe, "proxy", "-to", base); err != nil {
						up.Close()
					}
				case "shared":
				default:
					up.Close()
					return fail("-proxy is own or shared, not %q", *proxyHosting)
				}
			}
		default:
			return fail("-upstream is subprocess or inprocess, not %q", *hosting)
		}
		if err != nil {
			return fail("%v", err)
		}
		defer up.Close()
		for i, a := range serveArgs {
			serveArgs[i] = strings.ReplaceAll(a, "{upstream}", up.URL)
		}
	}
	var gw *MCPGateway
	if mcpGatewayBin != "" {
		if gw, err = StartMCPGateway(ctx, mcpGatewayBin, up.URL, mcpGatewayArgs); err != nil {
			return fail("%v", err)
		}
		defer gw.Close()
	}

	// The JSON API comes before toolplane too: the http tools' definitions
	// name its address.
	var api *API
	var apiToken string
	if needsAPI(targets) {
		if *hosting != "inprocess" && *hosting != "subprocess" {
			return fail("-upstream is subprocess or inprocess, not %q", *hosting)
		}
		if apiToken, err = randomToken(); err != nil {
			return fail("%v", err)
		}
		if *hosting == "inprocess" {
			api, err = StartAPI(ctx, *apiAddr, apiToken)
		} else {
			exe, xerr := os.Executable()
			if xerr != nil {
				return fail("find this program to run its api helper: %v", xerr)
			}
			api, err = StartAPIProcess(ctx, stderr, apiToken, exe, []string{"api", "-addr", *apiAddr}, []string{"proxy"})
		}
		if err != nil {
			return fail("%v", err)
		}
		defer api.Close()
	}
	var ngx *Nginx
	if nginxBin != "" {
		if ngx, err = StartNginx(ctx, nginxBin, api.URL); err != nil {
			return fail("%v", err)
		}
		defer ngx.Close()
	}
	httpTools := slices.Contains(targets, TargetHTTPRead) || slices.Contains(targets, TargetHTTPWrite)
	if httpTools {
		dir, err := os.MkdirTemp("", "toolplane-load-tools-")
		if err != nil {
			return fail("%v", err)
		}
		defer os.RemoveAll(dir)
		if err := WriteHTTPTools(dir, api.URL); err != nil {
			return fail("%v", err)
		}
		serveArgs = append(serveArgs, "--tools", dir)
	}

	started := "given"
	builds := []*build{{label: "given", baseURL: *baseURL, key: *key, federatedKey: *federatedKey}}
	if *baseURL == "" && needsToolplane(targets) {
		binaries := []string{*binary}
		if compare != nil {
			binaries = compare
		}
		builds = builds[:0]
		for i, bin := range binaries {
			b, err := startBuild(ctx, bin, *src, serveArgs, serveEnv, targets, httpTools, apiToken, *federatedKey, splitList(*federatedGrant))
			if err != nil {
				return fail("%v", err)
			}
			defer b.tp.Stop()
			b.label = bin
			if compare != nil {
				b.label = string(rune('A'+i)) + " (" + bin + ")"
			}
			builds = append(builds, b)
		}
		started = "started by this run, rate limit off (--rate-limit 0)"
	} else if needsToolplane(targets) && *key == "" {
		return fail("-url needs -key (or $TOOLPLANE_DEMO_AGENT_KEY)")
	}
	for _, b := range builds {
		b.baseURL = strings.TrimSuffix(b.baseURL, "/")
	}

	model := modelname.Derive(ReadTool)
	args0 := json.RawMessage(*arguments)
	targetsOf := func(b *build) map[string]Target {
		byName := map[string]Target{}
		for _, name := range targets {
			switch name {
			case TargetREST:
				byName[name] = &REST{Label: name, BaseURL: b.baseURL, Key: b.key, Tool: ReadTool, Arguments: args0, Expect: *expect}
			case TargetMCP:
				byName[name] = &MCP{Label: name, Endpoint: b.baseURL + "/mcp", Key: b.key, Tool: model, Arguments: args0, Expect: *expect}
			case TargetPlain:
				byName[name] = &MCP{Label: name, Endpoint: up.URL, Tool: model, Arguments: args0, Expect: *expect}
			case TargetProxy:
				byName[name] = &MCP{Label: name, Endpoint: up.ProxyURL, Tool: model, Arguments: args0, Expect: *expect}
			case TargetMCPGateway:
				byName[name] = &MCP{Label: name, Endpoint: gw.URL, Key: gw.Token, Tool: model, Arguments: args0, Expect: *expect}
			case TargetFederated:
				endpoint := *federated
				if strings.HasPrefix(endpoint, "/") {
					endpoint = b.baseURL + endpoint
				}
				k := b.federatedKey
				if k == "" {
					k = b.key
				}
				tool := *federatedTool
				if tool == "" {
					tool = model
				}
				byName[name] = &MCP{Label: name, Endpoint: endpoint, Key: k, Tool: tool, Arguments: args0, Expect: *expect}
			case TargetAPI:
				byName[name] = &HTTPGet{Label: name, URL: api.URL + itemPath + ItemID, Key: apiToken, Expect: ItemID}
			case TargetAPIProxy:
				byName[name] = &HTTPGet{Label: name, URL: api.ProxyURL + itemPath + ItemID, Key: apiToken, Expect: ItemID}
			case TargetAPINginx:
				byName[name] = &HTTPGet{Label: name, URL: ngx.URL + itemPath + ItemID, Key: apiToken, Expect: ItemID}
			case TargetHTTPRead, TargetHTTPWrite:
				tool := map[string]string{TargetHTTPRead: HTTPReadTool, TargetHTTPWrite: HTTPWriteTool}[name]
				byName[name] = &REST{Label: name, BaseURL: b.baseURL, Key: b.httpKey, Tool: tool, Arguments: json.RawMessage(`{"id":"` + ItemID + `"}`),
					Expect: ItemID, Write: name == TargetHTTPWrite}
			}
		}
		return byName
	}
	for _, b := range builds {
		b.targets = targetsOf(b)
	}

	fmt.Fprintf(stdout, "toolplane-load: %s, GOMAXPROCS %d, %d CPUs; %v measured after %v warm-up per cell, %d round(s)\n",
		runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), *duration, *warmup, *rounds)
	if needsToolplane(targets) {
		for _, b := range builds {
			fmt.Fprintf(stdout, "toolplane %s at %s (%s)\n", b.label, b.baseURL, started)
		}
	}
	if up != nil {
		where := *hosting
		if *hosting == "subprocess" && slices.Contains(targets, TargetProxy) {
			where += ", proxy " + map[string]string{"own": "in a process of its own", "shared": "in the upstream's process"}[*proxyHosting]
		}
		fmt.Fprintf(stdout, "plain MCP server at %s, bare proxy at %s (%s)\n", up.URL, up.ProxyURL, where)
	}
	if gw != nil {
		fmt.Fprintf(stdout, "docker/mcp-gateway (%s %s) at %s in front of the plain server, one process; HOME, catalog and log in %s\n",
			mcpGatewayBin, strings.Join(gw.Args, " "), gw.URL, gw.Dir)
	}
	if api != nil {
		fmt.Fprintf(stdout, "JSON API at %s, bare proxy at %s (%s)\n", api.URL, api.ProxyURL, map[string]string{
			"subprocess": "each in a process of its own", "inprocess": "in this process"}[*hosting])
	}
	if ngx != nil {
		fmt.Fprintf(stdout, "nginx (%s) at %s in front of the JSON API, one process, keep-alive pool of 256; config in %s\n", nginxBin, ngx.URL, ngx.Dir)
	}
	if compare != nil {
		return runCompare(ctx, stdout, stderr, builds, targets, clients, *rounds, *warmup, *duration, up, api, ngx)
	}
	single := builds[0]
	profiled := splitList(*pprofTargets)
	runs := map[string][]Result{}
	cell := func(target string, n int) string { return target + "/" + strconv.Itoa(n) }
	for round := range *rounds {
		// Every other round runs the targets in reverse, so none always
		// follows the same neighbour (whose sessions and garbage may
		// still be winding down).
		order := slices.Clone(targets)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, n := range clients {
			for _, name := range order {
				opts := Options{Clients: n, Warmup: *warmup, Duration: *duration, Processes: serverProcesses(name, single.pid(), up, gw, api, ngx)}
				if *pprofURL != "" && slices.Contains(profiled, name) {
					path := filepath.Join(*pprofDir, fmt.Sprintf("%s-%d.pprof", name, n))
					if *rounds > 1 {
						path = filepath.Join(*pprofDir, fmt.Sprintf("%s-%d-round%d.pprof", name, n, round+1))
					}
					opts.During = func(ctx context.Context, window time.Duration) error {
						return FetchProfile(ctx, *pprofURL, window, path)
					}
				}
				res, err := Run(ctx, single.targets[name], opts)
				if err != nil {
					return fail("%v", err)
				}
				if res.DuringError != nil {
					fmt.Fprintf(stderr, "toolplane-load: %s at %d clients: %v\n", name, n, res.DuringError)
				}
				fmt.Fprintf(stderr, "round %d: %s at %d clients: %.0f calls/s, p50 %s, p99 %s, %d errors%s\n",
					round+1, name, n, res.Rate(), ms(res.P50), ms(res.P99), res.Errors, cpuNote(res))
				runs[cell(name, n)] = append(runs[cell(name, n)], res)
				// Let sessions close and the collector catch up, so
				// one cell's tail does not land in the next.
				time.Sleep(300 * time.Millisecond)
			}
		}
	}
	var table []Result
	for _, n := range clients {
		for _, name := range targets {
			r, err := Median(runs[cell(name, n)])
			if err != nil {
				return fail("%v", err)
			}
			table = append(table, r)
		}
	}
	fmt.Fprintln(stdout)
	if err := WriteTable(stdout, table); err != nil {
		return fail("%v", err)
	}
	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout, "server CPU/call: user+system CPU of the server processes the calls pass through (toolplane, the proxy's, nginx or docker/mcp-gateway, the API's or the plain server's helper), over the window, per call; – where a server shares this process or was not started here.")
	fmt.Fprintln(stdout)
	var cells []Cell
	for _, n := range clients {
		for _, name := range targets {
			cells = append(cells, Cell{Target: name, Clients: n, Rounds: runs[cell(name, n)]})
		}
	}
	fmt.Fprintf(stdout, "Each process on its own: medians of %d round(s), lowest–highest in brackets; CPU per call is the process's user+system CPU over the window (its CPU-time clock, to the ns) over the calls.\n\n", *rounds)
	if err := WriteProcessTable(stdout, cells); err != nil {
		return fail("%v", err)
	}
	fmt.Fprintln(stdout)
	if lines := CPURatioLines(runs, clients); len(lines) > 0 {
		fmt.Fprintln(stdout, "Ratios of CPU per call, round by round (the two targets of a round measured within seconds of each other), then median and range. \"Processes in front alone\" sets toolplane's process against the proxy's (or nginx's) process alone: the server behind them is the same one and costs the same per call. \"Whole path\" adds it to both sides.")
		fmt.Fprintln(stdout)
	}
	for _, line := range CPURatioLines(runs, clients) {
		fmt.Fprintln(stdout, line)
	}
	for _, line := range Summary(table, clients) {
		fmt.Fprintln(stdout, line)
	}
	if *rounds > 1 {
		for _, pair := range []struct{ label, a, b string }{
			{"(b) MCP to plain", TargetMCP, TargetPlain},
			{"(c) federated to proxy", TargetFederated, TargetProxy},
			{"federated to docker/mcp-gateway", TargetFederated, TargetMCPGateway},
			{"http read tool to the API's proxy", TargetHTTPRead, TargetAPIProxy},
		} {
			for _, n := range clients {
				a, b := runs[cell(pair.a, n)], runs[cell(pair.b, n)]
				if len(a) == 0 || len(b) == 0 {
					continue
				}
				ratios, median := RoundRatios(a, b)
				parts := make([]string, len(ratios))
				for i, r := range ratios {
					parts[i] = fmt.Sprintf("%.0f%%", 100*r)
				}
				fmt.Fprintf(stdout, "- %s at %d client(s), round by round: %s (median %.0f%%)\n", pair.label, n, strings.Join(parts, ", "), 100*median)
			}
		}
	}
	for _, r := range table {
		if r.FirstError != nil {
			fmt.Fprintf(stdout, "- %s at %d clients, first error: %v\n", r.Target, r.Clients, r.FirstError)
		}
	}
	return 0
}

// Summary answers the lines that hold the table against the targets:
// REST throughput, toolplane's MCP throughput as a share of the plain
// server's, and what the proxy and federation add to the plain server's
// p50 at one client.
func Summary(table []Result, clients []int) []string {
	var out []string
	for _, n := range clients {
		if r, ok := Find(table, TargetREST, n); ok {
			out = append(out, fmt.Sprintf("- (a) REST at %d client(s): %s calls/s (target ≥ 8,000)", n, thousands(int64(r.Rate()+0.5))))
		}
	}
	for _, n := range clients {
		m, ok1 := Find(table, TargetMCP, n)
		p, ok2 := Find(table, TargetPlain, n)
		if ok1 && ok2 && p.Rate() > 0 {
			out = append(out, fmt.Sprintf("- (b) toolplane MCP at %d client(s): %.0f%% of the plain server's throughput (target ≥ 90%%)", n, 100*m.Rate()/p.Rate()))
		}
	}
	for _, n := range clients {
		f, ok1 := Find(table, TargetFederated, n)
		p, ok2 := Find(table, TargetProxy, n)
		if ok1 && ok2 && p.Rate() > 0 {
			out = append(out, fmt.Sprintf("- (c) federated at %d client(s): %.0f%% of the bare proxy's throughput (target ≥ 90%%)", n, 100*f.Rate()/p.Rate()))
		}
	}
	if direct, ok := Find(table, TargetPlain, 1); ok {
		for _, name := range []string{TargetProxy, TargetFederated} {
			if r, ok := Find(table, name, 1); ok {
				out = append(out, fmt.Sprintf("- (c) %s at 1 client adds %s to the direct p50 (target for federation ≤ 0.400 ms)", name, ms(r.P50-direct.P50)))
			}
		}
	}
	for _, n := range clients {
		h, ok1 := Find(table, TargetHTTPRead, n)
		p, ok2 := Find(table, TargetAPIProxy, n)
		if ok1 && ok2 && p.Rate() > 0 {
			out = append(out, fmt.Sprintf("- http read tool at %d client(s): %.0f%% of the bare proxy's throughput (target at 16 ≥ 70%%)", n, 100*h.Rate()/p.Rate()))
		}
	}
	if direct, ok := Find(table, TargetAPI, 1); ok {
		for _, name := range []string{TargetAPIProxy, TargetHTTPRead} {
			if r, ok := Find(table, name, 1); ok {
				out = append(out, fmt.Sprintf("- %s at 1 client adds %s to the JSON API's direct p50 (target for the http read tool ≤ 0.300 ms)", name, ms(r.P50-direct.P50)))
			}
		}
	}
	for _, n := range clients {
		if r, ok := Find(table, TargetHTTPWrite, n); ok {
			out = append(out, fmt.Sprintf("- http write tool at %d client(s): %s calls/s (target at 16 ≥ 2,000)", n, thousands(int64(r.Rate()+0.5))))
		}
	}
	return out
}

// RoundRatios answers a's throughput over b's round by round, and their
// median. Targets measured one after the other in the same round share
// whatever else the machine was doing then, so the ratio of a pair is
// steadier than the ratio of two medians taken from different rounds.
func RoundRatios(a, b []Result) (ratios []float64, median float64) {
	ratios = RateRatios(a, b)
	return ratios, SpreadOf(ratios).Median
}

// serverProcesses answers the server processes a target's calls run
// through, each with its role, or nil when one of them is not a process
// of its own this run knows: a toolplane given by -url, or baselines in
// this process, whose CPU would include the load generator's.
func serverProcesses(target string, toolplanePID int, up *Upstream, gw *MCPGateway, api *API, ngx *Nginx) []Process {
	switch target {
	case TargetAPI, TargetAPIProxy, TargetAPINginx, TargetHTTPRead, TargetHTTPWrite:
		if api == nil || api.pid == 0 {
			return nil
		}
		apiProc := Process{Role: RoleAPI, PID: api.pid}
		switch target {
		case TargetAPI:
			return []Process{apiProc}
		case TargetAPIProxy:
			if api.proxyPID == 0 {
				return nil
			}
			return []Process{{Role: RoleGoProxy, PID: api.proxyPID}, apiProc}
		case TargetAPINginx:
			if ngx == nil {
				return nil
			}
			return []Process{{Role: RoleNginx, PID: ngx.PID()}, apiProc}
		}
		if toolplanePID == 0 {
			return nil
		}
		return []Process{{Role: RoleToolplane, PID: toolplanePID}, apiProc}
	case TargetREST, TargetMCP:
		if toolplanePID == 0 {
			return nil
		}
		return []Process{{Role: RoleToolplane, PID: toolplanePID}}
	}
	if up == nil || up.pid == 0 {
		return nil
	}
	plain := Process{Role: RolePlain, PID: up.pid}
	switch target {
	case TargetPlain:
		return []Process{plain}
	case TargetProxy:
		if up.proxyPID == 0 {
			// The proxy shares the plain server's process.
			return []Process{plain}
		}
		return []Process{{Role: RoleGoProxy, PID: up.proxyPID}, plain}
	case TargetFederated:
		if toolplanePID == 0 {
			return nil
		}
		return []Process{{Role: RoleToolplane, PID: toolplanePID}, plain}
	case TargetMCPGateway:
		if gw == nil || gw.pid == 0 {
			return nil
		}
		return []Process{{Role: RoleMCPGateway, PID: gw.pid}, plain}
	}
	return nil
}

func needsUpstream(targets []string) bool {
	return slices.ContainsFunc(targets, func(t string) bool {
		return t == TargetPlain || t == TargetProxy || t == TargetFederated || t == TargetMCPGateway
	})
}

func needsToolplane(targets []string) bool {
	return slices.ContainsFunc(targets, func(t string) bool {
		return t == TargetREST || t == TargetMCP || t == TargetFederated || t == TargetHTTPRead || t == TargetHTTPWrite
	})
}

func needsAPI(targets []string) bool {
	return slices.ContainsFunc(targets, func(t string) bool {
		return t == TargetAPI || t == TargetAPIProxy || t == TargetAPINginx || t == TargetHTTPRead || t == TargetHTTPWrite
	})
}

// randomToken answers a fresh bearer token for the JSON API.
func randomToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("api token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parseClients(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 4096 {
			return nil, fmt.Errorf("-clients: %q is not a count from 1 to 4096", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("-clients: none given")
	}
	return out, nil
}

func parseTargets(s string) ([]string, error) {
	out := splitList(s)
	if len(out) == 0 {
		return nil, errors.New("-target: none given")
	}
	for _, t := range out {
		if !slices.Contains(allTargets, t) {
			return nil, fmt.Errorf("-target: unknown %q; known: %s", t, strings.Join(allTargets, ", "))
		}
	}
	return out, nil
}
