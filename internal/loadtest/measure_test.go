package loadtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	t.Parallel()
	// utime is the 14th field and stime the 15th, counting the pid as the
	// first and the parenthesised name as the second.
	tail := " S 1 2 3 4 5 6 7 8 9 10 %s %s 0 0 20 0 8 0 100 0 0"
	tests := []struct {
		name, line string
		want       time.Duration
		wantErr    bool
	}{
		{"plain", "1234 (toolplane)" + fmt.Sprintf(tail, "150", "25"), 1750 * time.Millisecond, false},
		{"a name with spaces and parentheses", "99 (tool (x) plane)" + fmt.Sprintf(tail, "1", "2"), 30 * time.Millisecond, false},
		{"zero", "7 (nginx)" + fmt.Sprintf(tail, "0", "0"), 0, false},
		{"no name", "1234 toolplane S 1 2 3", 0, true},
		{"too few fields", "1234 (toolplane) S 1 2 3", 0, true},
		{"not a number", "1 (x)" + fmt.Sprintf(tail, "ab", "2"), 0, true},
		{"negative", "1 (x)" + fmt.Sprintf(tail, "-1", "2"), 0, true},
	}
	for _, tt := range tests {
		got, err := parseStatCPU(tt.line)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("%s: parseStatCPU = %v, %v; want %v (error %v)", tt.name, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !errors.Is(err, errStat) {
			t.Errorf("%s: error %v is not errStat", tt.name, err)
		}
	}
}

// The process clock and /proc agree on a process's CPU, the clock to the
// nanosecond and /proc to its 10 ms tick.
func TestProcessClockMatchesStat(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	pid := os.Getpid()
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
	}
	before, err := statCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	clock, err := processClock(pid)
	if err != nil {
		t.Fatalf("the process clock is refused (ProcessCPU would fall back to /proc): %v", err)
	}
	after, err := statCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	// Other tests run in parallel, so the clock lies between the two
	// readings of /proc, give or take the ticks /proc rounds away.
	if clock < before-2*clockTick || clock > after+2*clockTick {
		t.Fatalf("clock %v outside /proc's %v..%v", clock, before, after)
	}
	if _, err := processClock(0); err == nil {
		t.Error("a clock of process 0 was read")
	}
}

func TestSpreadOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		xs   []float64
		want Spread
	}{
		{nil, Spread{}},
		{[]float64{2}, Spread{2, 2, 2, 1}},
		{[]float64{3, 1, 2}, Spread{2, 1, 3, 3}},
		{[]float64{4, 1, 3, 2}, Spread{2.5, 1, 4, 4}},
		{[]float64{1.1, 0.9, 1.0, 1.3, 0.8}, Spread{1.0, 0.8, 1.3, 5}},
	}
	for _, tt := range tests {
		in := slices.Clone(tt.xs)
		if got := SpreadOf(tt.xs); got != tt.want {
			t.Errorf("SpreadOf(%v) = %+v, want %+v", tt.xs, got, tt.want)
		}
		if !slices.Equal(in, tt.xs) {
			t.Errorf("SpreadOf reordered its input: %v", tt.xs)
		}
	}
}

func TestCPURatios(t *testing.T) {
	t.Parallel()
	r := func(costs ...any) Result {
		var res Result
		for i := 0; i < len(costs); i += 2 {
			res.Processes = append(res.Processes, ProcessCost{Role: costs[i].(string), PerCall: time.Duration(costs[i+1].(int)) * time.Microsecond})
		}
		return res
	}
	tp := []string{RoleToolplane}
	tests := []struct {
		name           string
		a, b           []Result
		rolesA, rolesB []string
		want           []float64
	}{
		{"process in front alone", []Result{r(RoleToolplane, 120, RoleAPI, 50), r(RoleToolplane, 150, RoleAPI, 60)},
			[]Result{r(RoleGoProxy, 80, RoleAPI, 50), r(RoleGoProxy, 100, RoleAPI, 40)}, tp, []string{RoleGoProxy}, []float64{1.5, 1.5}},
		{"whole path", []Result{r(RoleToolplane, 150, RoleAPI, 50)}, []Result{r(RoleGoProxy, 50, RoleAPI, 50)},
			[]string{RoleToolplane, RoleAPI}, []string{RoleGoProxy, RoleAPI}, []float64{2}},
		{"a round without the role is left out", []Result{r(RoleToolplane, 100), r(RoleToolplane, 90)},
			[]Result{r(RoleAPI, 50), r(RoleNginx, 30)}, tp, []string{RoleNginx}, []float64{3}},
		{"a zero reading is left out", []Result{r(RoleToolplane, 100)}, []Result{r(RoleNginx, 0)}, tp, []string{RoleNginx}, nil},
		{"unequal lengths pair what they can", []Result{r(RoleToolplane, 100)}, []Result{r(RoleNginx, 25), r(RoleNginx, 50)},
			tp, []string{RoleNginx}, []float64{4}},
		{"none", nil, nil, tp, tp, nil},
	}
	for _, tt := range tests {
		got := CPURatios(tt.a, tt.b, tt.rolesA, tt.rolesB)
		if fmt.Sprintf("%.3f", got) != fmt.Sprintf("%.3f", tt.want) {
			t.Errorf("%s: CPURatios = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestCPURatioLines(t *testing.T) {
	t.Parallel()
	res := func(target string, costs ...int) Result {
		r := Result{Target: target, Calls: 1000, Window: time.Second}
		roles := map[string][]string{
			TargetHTTPRead: {RoleToolplane, RoleAPI}, TargetAPIProxy: {RoleGoProxy, RoleAPI}, TargetAPINginx: {RoleNginx, RoleAPI},
			TargetHTTPWrite: {RoleToolplane, RoleAPI}}[target]
		for i, c := range costs {
			r.Processes = append(r.Processes, ProcessCost{Role: roles[i], PerCall: time.Duration(c) * time.Microsecond})
		}
		return r
	}
	runs := map[string][]Result{
		"httpread/16":  {res(TargetHTTPRead, 120, 40), res(TargetHTTPRead, 130, 40), res(TargetHTTPRead, 200, 40)},
		"apiproxy/16":  {res(TargetAPIProxy, 80, 40), res(TargetAPIProxy, 100, 40), res(TargetAPIProxy, 100, 40)},
		"apinginx/16":  {res(TargetAPINginx, 24, 40), res(TargetAPINginx, 26, 40), res(TargetAPINginx, 25, 40)},
		"httpwrite/16": {res(TargetHTTPWrite, 400, 40), res(TargetHTTPWrite, 420, 40), res(TargetHTTPWrite, 380, 40)},
	}
	got := strings.Join(CPURatioLines(runs, []int{1, 16}), "\n")
	for _, want := range []string{
		"httpread toolplane ÷ apiproxy Go proxy (processes in front alone), 16 client(s): 1.50 1.30 2.00 → median 1.50× (1.30–2.00, 3 rounds) (target ≤ 1.0×)",
		"httpread toolplane ÷ apinginx nginx (processes in front alone), 16 client(s): 5.00 5.00 8.00 → median 5.00× (5.00–8.00, 3 rounds) (target ≤ 3×)",
		"apiproxy Go proxy ÷ apinginx nginx, 16 client(s): 3.33 3.85 4.00 → median 3.85×",
		"httpread toolplane+api ÷ apiproxy Go proxy+api (whole path), 16 client(s): 1.33 1.21 1.71",
		"httpwrite toolplane alone, 16 client(s): 400 (380–420) µs (target ≤ 200 µs)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("ratio lines lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, " 1 client(s)") || strings.Contains(got, "mcp") {
		t.Errorf("ratio lines for cells not measured:\n%s", got)
	}
}

func TestCPURatioLinesMCPGateway(t *testing.T) {
	t.Parallel()
	res := func(costs ...any) Result {
		r := Result{Calls: 1000, Window: time.Second}
		for i := 0; i < len(costs); i += 2 {
			r.Processes = append(r.Processes, ProcessCost{Role: costs[i].(string), PerCall: time.Duration(costs[i+1].(int)) * time.Microsecond})
		}
		return r
	}
	runs := map[string][]Result{
		"mcp/1":        {res(RoleToolplane, 100), res(RoleToolplane, 120)},
		"federated/1":  {res(RoleToolplane, 150, RolePlain, 50), res(RoleToolplane, 160, RolePlain, 60)},
		"mcpgateway/1": {res(RoleMCPGateway, 400, RolePlain, 50), res(RoleMCPGateway, 300, RolePlain, 60)},
		"proxy/1":      {res(RoleGoProxy, 40, RolePlain, 50), res(RoleGoProxy, 50, RolePlain, 60)},
	}
	got := strings.Join(CPURatioLines(runs, []int{1, 16}), "\n")
	for _, want := range []string{
		"mcp toolplane ÷ mcpgateway docker/mcp-gateway (processes in front alone), 1 client(s): 0.25 0.40 → median 0.33× (0.25–0.40, 2 rounds) (target ≤ 0.4×)",
		"mcp toolplane ÷ mcpgateway docker/mcp-gateway+plain (toolplane serves the tool itself), 1 client(s): 0.22 0.33 → median 0.28×",
		"federated toolplane ÷ mcpgateway docker/mcp-gateway (processes in front alone; like for like), 1 client(s): 0.38 0.53 → median 0.45× (0.38–0.53, 2 rounds) (target ≤ 0.4×)",
		"federated toolplane+plain ÷ mcpgateway docker/mcp-gateway+plain (whole path), 1 client(s): 0.44 0.61 → median 0.53×",
		"mcpgateway docker/mcp-gateway ÷ proxy Go proxy, 1 client(s): 10.00 6.00 → median 8.00×",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("ratio lines lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "16 client(s)") {
		t.Errorf("ratio lines for cells not measured:\n%s", got)
	}
}

func TestWriteProcessTable(t *testing.T) {
	t.Parallel()
	r := func(calls int, p50 time.Duration, costs ...ProcessCost) Result {
		var total time.Duration
		for _, c := range costs {
			total += c.PerCall
		}
		return Result{Calls: calls, Window: time.Second, P50: p50, P99: 2 * p50, Processes: costs, CPUPerCall: total}
	}
	ng := func(us int) ProcessCost { return ProcessCost{RoleNginx, time.Duration(us) * time.Microsecond} }
	api := func(us int) ProcessCost { return ProcessCost{RoleAPI, time.Duration(us) * time.Microsecond} }
	var b strings.Builder
	err := WriteProcessTable(&b, []Cell{
		{Target: TargetAPINginx, Clients: 16, Rounds: []Result{
			r(9000, time.Millisecond, ng(24), api(50)), r(11000, 3*time.Millisecond, ng(26), api(40)), r(10000, 2*time.Millisecond, ng(25), api(45))}},
		{Target: TargetAPI, Clients: 1, Rounds: []Result{r(5000, 200*time.Microsecond)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "| target | clients | calls/s | p50 ms | p99 ms | nginx µs/call | api µs/call | all servers µs/call |\n" +
		"| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n" +
		"| apinginx | 16 | 10,000 (9,000–11,000) | 2.000 (1.000–3.000) | 4.000 (2.000–6.000) | 25 (24–26) | 45 (40–50) | 70 (66–74) |\n" +
		"| api | 1 | 5,000 (5,000–5,000) | 0.200 | 0.400 | – | – | – |\n"
	if b.String() != want {
		t.Fatalf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestServerProcesses(t *testing.T) {
	t.Parallel()
	api := &API{pid: 10, proxyPID: 11}
	up := &Upstream{pid: 20, proxyPID: 21}
	shared := &Upstream{pid: 20}
	ngx := &Nginx{pid: 30}
	gw := &MCPGateway{pid: 50}
	const tp = 40
	tests := []struct {
		target string
		tp     int
		up     *Upstream
		gw     *MCPGateway
		api    *API
		ngx    *Nginx
		want   string
	}{
		{TargetAPI, 0, nil, nil, api, nil, "[{api 10}]"},
		{TargetAPIProxy, 0, nil, nil, api, nil, "[{goproxy 11} {api 10}]"},
		{TargetAPINginx, 0, nil, nil, api, ngx, "[{nginx 30} {api 10}]"},
		{TargetAPINginx, 0, nil, nil, api, nil, "[]"},
		{TargetHTTPRead, tp, nil, nil, api, nil, "[{toolplane 40} {api 10}]"},
		{TargetHTTPWrite, 0, nil, nil, api, nil, "[]"},
		{TargetHTTPRead, tp, nil, nil, &API{}, nil, "[]"},
		{TargetREST, tp, nil, nil, nil, nil, "[{toolplane 40}]"},
		{TargetMCP, 0, nil, nil, nil, nil, "[]"},
		{TargetPlain, 0, up, nil, nil, nil, "[{plain 20}]"},
		{TargetProxy, 0, up, nil, nil, nil, "[{goproxy 21} {plain 20}]"},
		{TargetProxy, 0, shared, nil, nil, nil, "[{plain 20}]"},
		{TargetProxy, 0, &Upstream{}, nil, nil, nil, "[]"},
		{TargetFederated, tp, up, nil, nil, nil, "[{toolplane 40} {plain 20}]"},
		{TargetMCPGateway, 0, up, gw, nil, nil, "[{mcpgateway 50} {plain 20}]"},
		{TargetMCPGateway, 0, up, nil, nil, nil, "[]"},
		{TargetMCPGateway, 0, &Upstream{}, gw, nil, nil, "[]"},
	}
	for _, tt := range tests {
		if got := fmt.Sprint(serverProcesses(tt.target, tt.tp, tt.up, tt.gw, tt.api, tt.ngx)); got != tt.want {
			t.Errorf("serverProcesses(%s, toolplane %d) = %s, want %s", tt.target, tt.tp, got, tt.want)
		}
	}
}

func TestParseCompare(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{a + "," + b, []string{a, b}, false},
		{" " + a + " , " + a, []string{a, a}, false},
		{a, nil, true},
		{a + "," + b + "," + a, nil, true},
		{a + ",", nil, true},
		{a + "," + filepath.Join(dir, "missing"), nil, true},
		{a + "," + dir, nil, true},
	}
	for _, tt := range tests {
		got, err := parseCompare(tt.in)
		if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
			t.Errorf("parseCompare(%q) = %v, %v; want %v (error %v)", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !errors.Is(err, errCompare) {
			t.Errorf("parseCompare(%q): %v is not errCompare", tt.in, err)
		}
	}
}

func TestHasCandidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		policy string
		want   bool
	}{
		{"nginx-light:\n  Installed: (none)\n  Candidate: 1.22.1-9+deb12u12\n  Version table:\n", true},
		{"nginx-light:\n  Installed: (none)\n  Candidate: (none)\n", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := hasCandidate(tt.policy); got != tt.want {
			t.Errorf("hasCandidate(%q) = %v, want %v", tt.policy, got, tt.want)
		}
	}
}

func TestFindNginx(t *testing.T) {
	t.Parallel()
	if _, err := FindNginx(filepath.Join(t.TempDir(), "nginx")); !errors.Is(err, ErrNoNginx) || !strings.Contains(err.Error(), "apt-get install -y nginx") {
		t.Fatalf("FindNginx of a missing file = %v, want ErrNoNginx saying how to install it", err)
	}
}

// nginx, when installed, takes the configuration NginxConfig writes and
// proxies to the JSON API through it, and its CPU is read per call.
func TestNginxInFrontOfAPI(t *testing.T) {
	t.Parallel()
	bin, err := FindNginx("")
	if errors.Is(err, ErrNoNginx) {
		t.Skipf("nginx is not installed, so the %s target cannot be tested here: %v", TargetAPINginx, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(NginxConfig(dir, "127.0.0.1:1", "127.0.0.1:2", 8)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-t", "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log")).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t refuses the configuration: %v\n%s", err, out)
	}
	api, err := StartAPI(t.Context(), "127.0.0.1:0", "tok")
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	ngx, err := StartNginx(t.Context(), bin, api.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer ngx.Close()
	target := &HTTPGet{Label: TargetAPINginx, URL: ngx.URL + itemPath + ItemID, Key: "tok", Expect: ItemID}
	res, err := Run(t.Context(), target, Options{Clients: 2, Duration: 300 * time.Millisecond, Processes: []Process{{RoleNginx, ngx.PID()}}})
	if err != nil || res.Calls == 0 || res.Errors != 0 {
		t.Fatalf("Run = %+v, %v (first error %v)", res, err, res.FirstError)
	}
	if d, ok := res.RoleCPU(RoleNginx); !ok || d <= 0 {
		t.Errorf("nginx's CPU per call was not measured: %+v", res)
	}
	// Without the API's token nginx passes on the API's refusal.
	bad := &HTTPGet{Label: TargetAPINginx, URL: ngx.URL + itemPath + ItemID, Key: "wrong", Expect: ItemID}
	if res, err := Run(t.Context(), bad, Options{Clients: 1, Duration: 50 * time.Millisecond}); err != nil || res.Calls != 0 || res.Errors == 0 {
		t.Errorf("calls with a wrong token through nginx: %+v, %v", res, err)
	}
	nd := ngx.Dir
	if err := ngx.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(nd); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("nginx's directory %s outlives it: %v", nd, err)
	}
	if _, err := StartNginx(t.Context(), bin, "not a url"); err == nil {
		t.Error("nginx started in front of no URL")
	}
}
