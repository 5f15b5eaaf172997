package browsertest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/toolplane/toolplane/internal/syncbuf"
)

// The bounds of a test's waits. A loaded CI machine builds, starts
// servers and browsers slowly; a step that takes longer than this is
// stuck, not slow.
const (
	startTimeout = 2 * time.Minute  // a server or a browser to come up
	stepTimeout  = 45 * time.Second // one step in the browser, one condition polled
	testTimeout  = 6 * time.Minute  // a whole browser, however many steps
)

// inCI reports whether the tests run under CI, where a browser test must
// run rather than skip.
func inCI() bool {
	v := os.Getenv("CI")
	return v != "" && v != "false" && v != "0"
}

// chromium answers the browser executable the tests drive, from
// $TOOLPLANE_TEST_CHROMIUM; without it the test is skipped, or fails
// under CI. Like the other end-to-end runs, -short leaves them out.
func chromium(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the browser tests build toolplane and start Chromium")
	}
	exe := os.Getenv("TOOLPLANE_TEST_CHROMIUM")
	if exe == "" {
		if inCI() {
			t.Fatal("TOOLPLANE_TEST_CHROMIUM is not set under CI: .ci/run installs chromium and sets it, and the browser tests must run there")
		}
		t.Skip("TOOLPLANE_TEST_CHROMIUM is not set: set it to a Chromium executable (TOOLPLANE_TEST_CHROMIUM=/usr/bin/chromium) to run the browser tests")
	}
	if _, err := exec.LookPath(exe); err != nil {
		t.Fatalf("TOOLPLANE_TEST_CHROMIUM=%s: %v", exe, err)
	}
	return exe
}

// built is the toolplane binary, built once for every test of the
// package.
var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// binary answers the path of toolplane built from this checkout's
// ./cmd/toolplane, as a user builds it.
func binary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		repo, err := filepath.Abs("../..")
		if err != nil {
			built.err = err
			return
		}
		if built.dir, built.err = os.MkdirTemp("", "toolplane-browsertest-"); built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "toolplane")
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", built.path, "./cmd/toolplane")
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build ./cmd/toolplane: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// server is a toolplane binary serving the demo catalogue on a free
// loopback port, over its own SQLite file.
type server struct {
	// base is where it listens, http://127.0.0.1:PORT: its public URL,
	// the one origin its forms are accepted from.
	base string
	// data is its data directory (credentials.env, the SQLite file).
	data string
	// admin is the admin key first start wrote; agent the demo agent's.
	admin, agent string
	out          *syncbuf.Buffer
}

// startServer builds toolplane (once), starts `serve --demo` on a free
// port with extra flags, waits for it to answer, and stops it when the
// test ends. Its output is logged when the test fails.
func startServer(t *testing.T, extra ...string) *server {
	t.Helper()
	return startServerEnv(t, nil, extra...)
}

// startServerEnv is startServer with env (NAME=VALUE) added to the
// server's environment: the settings serve reads only from there, such
// as secrets. A later --addr in extra overrides the free port.
func startServerEnv(t *testing.T, env []string, extra ...string) *server {
	t.Helper()
	chromium(t) // a test without a browser builds nothing
	bin := binary(t)
	data := filepath.Join(t.TempDir(), "data")
	args := append([]string{"serve", "--demo", "--addr", "127.0.0.1:0", "--database", filepath.Join(data, "toolplane.db"), "--log-format", "text"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(cleanEnv(), env...)
	s := &server{data: data, out: &syncbuf.Buffer{}}
	cmd.Stdout, cmd.Stderr = s.out, s.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("toolplane's output:\n%s", s.out.String())
		}
	})

	// The first line names the address it listens on.
	addrRE := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+) `)
	deadline := time.Now().Add(startTimeout)
	for s.base == "" {
		if m := addrRE.FindStringSubmatch(s.out.String()); m != nil {
			s.base = m[1]
			break
		}
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("toolplane serve exited: %v\n%s", err, s.out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("toolplane serve did not start within %v:\n%s", startTimeout, s.out.String())
		}
	}
	for {
		if resp, err := http.Get(s.base + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/healthz did not answer 200 within %v", s.base, startTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	creds := readCreds(t, filepath.Join(data, "credentials.env"))
	s.admin, s.agent = creds["TOOLPLANE_ADMIN_KEY"], creds["TOOLPLANE_DEMO_AGENT_KEY"]
	if s.admin == "" || s.agent == "" {
		t.Fatalf("credentials.env lacks the admin or the demo agent's key: %v", keysOf(creds))
	}
	return s
}

// cleanEnv answers the test's environment without TOOLPLANE_ settings,
// so the server runs on its flags alone.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TOOLPLANE_") {
			env = append(env, kv)
		}
	}
	return env
}

// readCreds reads a credentials.env file of NAME=VALUE lines.
func readCreds(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	creds := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if k, v, ok := strings.Cut(l, "="); ok {
			creds[strings.TrimPrefix(k, "export ")] = strings.Trim(v, `"'`)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return creds
}

func keysOf(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// api sends one REST request with key as the bearer credential and body
// (JSON, or "" for none), and answers the status and the decoded answer.
func (s *server) api(t *testing.T, method, path, key, body string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	ctx, cancel := context.WithTimeout(t.Context(), stepTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	v := map[string]any{}
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("%s %s: %d, not a JSON object: %s", method, path, resp.StatusCode, raw)
		}
	}
	return resp.StatusCode, v
}

// must is api that fails the test unless the answer has status want.
func (s *server) must(t *testing.T, method, path, key, body string, want int) map[string]any {
	t.Helper()
	status, v := s.api(t, method, path, key, body)
	if status != want {
		t.Fatalf("%s %s: %d, want %d: %v", method, path, status, want, v)
	}
	return v
}

// mint answers a new API key, minted over REST with the admin key.
func (s *server) mint(t *testing.T, kind, subject string, roles ...string) string {
	t.Helper()
	body, err := json.Marshal(map[string]any{"kind": kind, "subject": subject, "roles": roles, "label": "browser test"})
	if err != nil {
		t.Fatal(err)
	}
	v := s.must(t, "POST", "/v1/keys", s.admin, string(body), http.StatusCreated)
	key, _ := v["key"].(string)
	if key == "" {
		t.Fatalf("minting %s %s answered no key: %v", kind, subject, v)
	}
	return key
}

// browser is a tab of a fresh headless Chromium with a profile of its
// own, closed when the test ends.
type browser struct {
	ctx context.Context
	out *syncbuf.Buffer
}

// newBrowser starts Chromium. The flags keep it from reaching anything
// but the test's servers (no updates, sync or background fetches) and
// let it run as root in a container (no sandbox, no GPU).
func newBrowser(t *testing.T) *browser {
	t.Helper()
	exe := chromium(t)
	b := &browser{out: &syncbuf.Buffer{}}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("mute-audio", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		chromedp.CombinedOutput(b.out),
	}
	root, cancelRoot := context.WithTimeout(context.Background(), testTimeout)
	alloc, cancelAlloc := chromedp.NewExecAllocator(root, opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		_ = chromedp.Cancel(ctx)
		cancel()
		cancelAlloc()
		cancelRoot()
		if t.Failed() {
			t.Logf("chromium's output:\n%s", b.out.String())
		}
	})
	// The first run starts the browser under the test's whole bound;
	// each step after it has its own.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("starting %s: %v\n%s", exe, err, b.out.String())
		}
	case <-time.After(startTimeout):
		t.Fatalf("%s did not start within %v\n%s", exe, startTimeout, b.out.String())
	}
	// Every document records what its Content-Security-Policy refused
	// (a script or style of its own the policy does not admit is a
	// broken page); the recorder runs before the page's own code, and
	// CSP does not apply to it.
	sctx, scancel := context.WithTimeout(ctx, stepTimeout)
	defer scancel()
	if _, err := chromedp.Call(sctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: cspRecorder}); err != nil {
		t.Fatal(err)
	}
	b.ctx = ctx
	return b
}

// cspRecorder collects the page's CSP violations in window.__csp.
const cspRecorder = `window.__csp = [];
document.addEventListener("securitypolicyviolation", e => window.__csp.push(e.violatedDirective + " " + (e.blockedURI || "inline")));`

// checkCSP fails the test when the page in the tab broke its
// Content-Security-Policy since it loaded: something the page itself
// uses (its stylesheet, its script, an inline style) was refused.
func (b *browser) checkCSP(t *testing.T) {
	t.Helper()
	if got := eval[[]string](t, b, `window.__csp || []`); len(got) > 0 {
		t.Errorf("the page at %s broke its Content-Security-Policy: %v", eval[string](t, b, "location.href"), got)
	}
}

// do runs steps in the tab, each run bounded by stepTimeout, and fails
// the test with what the page shows when one fails.
func (b *browser) do(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, b.describe())
	}
}

// eval answers a JavaScript expression's value in the page.
func eval[T any](t *testing.T, b *browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v\n%s", expr, err, b.describe())
	}
	return v
}

// open navigates to url and waits for sel to be visible in the page.
func (b *browser) open(t *testing.T, url, sel string) {
	t.Helper()
	b.do(t, "open "+url, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(sel)))
}

// submit clicks the button sel, which sends its form, and answers the
// HTTP status of the page the browser lands on.
func (b *browser) submit(t *testing.T, sel string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("click %s: %v\n%s", sel, err, b.describe())
	}
	return resp.Status
}

// waitFor polls a JavaScript condition until it holds, within
// stepTimeout. A navigation under way only makes a poll fail, and the
// next one reads the new page.
func (b *browser) waitFor(t *testing.T, what, cond string) {
	t.Helper()
	deadline := time.Now().Add(stepTimeout)
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+cond+")"))
		cancel()
		if err == nil && ok {
			return
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not so within %v (last error: %v)\n%s", what, stepTimeout, last, b.describe())
}

// waitText waits until the element sel shows text.
func (b *browser) waitText(t *testing.T, sel, text string) {
	t.Helper()
	b.waitFor(t, fmt.Sprintf("%s shows %q", sel, text),
		fmt.Sprintf(`(document.querySelector(%s)?.innerText ?? "").includes(%s)`, jsString(sel), jsString(text)))
}

// text answers the visible text of the first element sel, "" when there
// is none.
func (b *browser) text(t *testing.T, sel string) string {
	t.Helper()
	return eval[string](t, b, fmt.Sprintf(`document.querySelector(%s)?.innerText ?? ""`, jsString(sel)))
}

// checkSessionCookie fails the test unless the browser holds a session
// cookie for base that is HttpOnly (no script reads it, and a script of
// the page does not see it), SameSite=Lax and for the whole server.
func (b *browser) checkSessionCookie(t *testing.T, base string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	cookies, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/"}})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	var session *network.Cookie
	for _, c := range cookies.Cookies {
		if c.Name == "toolplane_session" {
			session = c
		}
	}
	if session == nil {
		t.Fatalf("no session cookie after sign-in: %+v", cookies.Cookies)
	}
	if !session.HTTPOnly || session.SameSite != network.CookieSameSiteLax || session.Path != "/" {
		t.Errorf("session cookie: HttpOnly %v, SameSite %q, Path %q; want HttpOnly, Lax, /", session.HTTPOnly, session.SameSite, session.Path)
	}
	if got := eval[string](t, b, "document.cookie"); strings.Contains(got, "toolplane_session") {
		t.Errorf("a script reads the session cookie: %q", got)
	}
}

// describe answers where the tab is and what it shows, for a failure's
// message; it never fails itself.
func (b *browser) describe() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	where, _ := chromedp.Run(ctx, chromedp.Location())
	body, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	if err != nil {
		body = "(unreadable: " + err.Error() + ")"
	}
	if len(body) > 4000 {
		body = body[:4000] + "…"
	}
	return "--- the page at " + where + " ---\n" + body
}

// jsString answers s as a JavaScript string literal.
func jsString(s string) string {
	raw, _ := json.Marshal(s)
	return string(raw)
}

// axeSource answers axe-core's script (axe.min.js), from the file
// $TOOLPLANE_TEST_AXE names; without it the test is skipped, or fails
// under CI, like chromium.
func axeSource(t *testing.T) string {
	t.Helper()
	path := os.Getenv("TOOLPLANE_TEST_AXE")
	if path == "" {
		if inCI() {
			t.Fatal("TOOLPLANE_TEST_AXE is not set under CI: .ci/run installs axe-core and sets it, and the accessibility checks must run there")
		}
		t.Skip("TOOLPLANE_TEST_AXE is not set: set it to axe-core's axe.min.js (npm install axe-core@4) to run the accessibility checks")
	}
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("TOOLPLANE_TEST_AXE=%s: %v", path, err)
	}
	return string(src)
}

// checkAxe runs axe-core (its source, axeSource) over the page in the
// tab and fails the test on each violation of serious or critical impact,
// naming the rule and the first elements that break it.
func (b *browser) checkAxe(t *testing.T, src, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	// Evaluated through the DevTools protocol, the script is not the
	// page's: the page's Content-Security-Policy does not apply to it.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](src+"\n;true")); err != nil {
		t.Fatalf("%s: loading axe-core: %v", what, err)
	}
	found, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`axe.run(document, {resultTypes: ["violations"]}).then(r => r.violations
		.filter(v => v.impact === "serious" || v.impact === "critical")
		.map(v => v.id + " (" + v.impact + "): " + v.help + " at " + v.nodes.slice(0, 3).map(n => n.target.join(" ")).join(", ")))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%s: running axe-core: %v", what, err)
	}
	for _, v := range found {
		t.Errorf("%s: %s", what, v)
	}
}

// checkOverflow fails the test when the page in the tab is wider than
// width, the viewport's, naming the innermost elements past its edge.
func (b *browser) checkOverflow(t *testing.T, what string, width int64) {
	t.Helper()
	if w := eval[int64](t, b, "document.documentElement.scrollWidth"); w > width {
		wide := eval[[]string](t, b, fmt.Sprintf(`[...document.querySelectorAll("body *")]
			.filter(e => e.getBoundingClientRect().right > %[1]d.5 && ![...e.children].some(c => c.getBoundingClientRect().right > %[1]d.5))
			.slice(0, 5).map(e => e.tagName.toLowerCase() + (e.className ? "." + e.className : "") + " " + Math.round(e.getBoundingClientRect().right) + "px: " + (e.innerText || "").slice(0, 40))`, width))
		t.Errorf("%s: the page is %d px wide at %d px, it scrolls sideways; past the edge: %q", what, w, width, wide)
	}
}

// screenshotDir answers where the tests keep their screenshots:
// $TOOLPLANE_TEST_SCREENSHOTS (or $TOOLPLANE_SCREENSHOTS) when set, to
// look at, else the test's own temporary directory.
func screenshotDir(t *testing.T) string {
	t.Helper()
	for _, env := range []string{"TOOLPLANE_TEST_SCREENSHOTS", "TOOLPLANE_SCREENSHOTS"} {
		if dir := os.Getenv(env); dir != "" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			return dir
		}
	}
	return t.TempDir()
}

// screenshot saves the whole page in the tab as dir/name.png.
func (b *browser) screenshot(t *testing.T, dir, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if !bytes.HasPrefix(shot, []byte("\x89PNG")) {
		t.Fatalf("screenshot %s: not a PNG", name)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}
}
