package loadtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// ErrNoNginx is what FindNginx answers when there is no nginx to run.
var ErrNoNginx = errors.New("no nginx")

// defaultNginx is where Debian's packages put nginx, looked at when it is
// not on PATH (/usr/sbin is not on every user's).
const defaultNginx = "/usr/sbin/nginx"

// FindNginx answers the nginx binary to run: path when set, else nginx on
// PATH, else /usr/sbin/nginx; ErrNoNginx (with how to install it) when
// none is there.
func FindNginx(path string) (string, error) {
	if path != "" {
		p, err := exec.LookPath(path)
		if err != nil {
			return "", fmt.Errorf("%w at %s (%v); %s", ErrNoNginx, path, err, nginxHint)
		}
		return p, nil
	}
	if p, err := exec.LookPath("nginx"); err == nil {
		return p, nil
	}
	if p, err := exec.LookPath(defaultNginx); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%w on PATH or at %s; %s", ErrNoNginx, defaultNginx, nginxHint)
}

// nginxHint says how to get nginx.
const nginxHint = "install it (Debian: apt-get install -y nginx, or nginx-light), pass -nginx PATH, or run with -install-nginx"

// nginxPackages are Debian's packages that bring an nginx binary, in the
// order tried. On bookworm the binary is in nginx itself and nginx-light
// is a metapackage adding a module to it; on older releases nginx is the
// metapackage and nginx-light one of the binaries it can pull in. Either
// way nginx is enough.
var nginxPackages = []string{"nginx", "nginx-light"}

// InstallNginx installs Debian's nginx with apt-get: the first of
// nginxPackages that apt-cache knows a candidate for. It needs
// root (or an apt-get that may install) and writes apt's output to out.
func InstallNginx(ctx context.Context, out io.Writer) error {
	for _, pkg := range nginxPackages {
		policy, err := exec.CommandContext(ctx, "apt-cache", "policy", pkg).Output()
		if err != nil {
			return fmt.Errorf("install nginx: apt-cache policy %s: %w", pkg, err)
		}
		if !hasCandidate(string(policy)) {
			continue
		}
		cmd := exec.CommandContext(ctx, "apt-get", "install", "-y", pkg)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("install nginx: apt-get install -y %s: %w", pkg, err)
		}
		return nil
	}
	return fmt.Errorf("install nginx: apt-cache knows none of %s (run apt-get update?)", strings.Join(nginxPackages, ", "))
}

// hasCandidate reports whether apt-cache policy's output names a version
// to install.
func hasCandidate(policy string) bool {
	for _, line := range strings.Split(policy, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Candidate:"); ok {
			v = strings.TrimSpace(v)
			return v != "" && v != "(none)"
		}
	}
	return false
}

// NginxConfig answers an nginx configuration that proxies every request
// on listen (host:port) to upstream (host:port) over a pool of kept-alive
// connections, as an operator would put nginx in front of an API, with
// every file it writes under dir, so it runs without root. It is one
// process (master_process off): the process measured is the one that
// serves. keepalive is the pool's size, as the Go proxy's 256 idle
// connections per host.
func NginxConfig(dir, listen, upstream string, keepalive int) string {
	p := func(name string) string { return filepath.Join(dir, name) }
	return fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
pid %s;
error_log %s warn;
events {
    worker_connections 4096;
}
http {
    access_log off;
    client_body_temp_path %s;
    proxy_temp_path %s;
    fastcgi_temp_path %s;
    uwsgi_temp_path %s;
    scgi_temp_path %s;
    upstream api {
        server %s;
        keepalive %d;
        keepalive_requests 1000000;
    }
    server {
        listen %s;
        keepalive_requests 1000000;
        location / {
            proxy_pass http://api;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
`, p("nginx.pid"), p("error.log"), p("client_body"), p("proxy"), p("fastcgi"), p("uwsgi"), p("scgi"),
		upstream, keepalive, listen)
}

// Nginx is an nginx process proxying to a server, started for a run.
type Nginx struct {
	// URL is its base URL.
	URL string
	// Dir holds its configuration and error log.
	Dir  string
	pid  int
	stop func() error
}

// PID answers the id of the process that serves.
func (n *Nginx) PID() int { return n.pid }

// Close stops nginx and removes its directory.
func (n *Nginx) Close() error { return n.stop() }

// StartNginx runs binary (see FindNginx) as a reverse proxy to to (a base
// URL such as the JSON API's) in a temporary directory, and answers once
// it accepts connections.
func StartNginx(ctx context.Context, binary, to string) (*Nginx, error) {
	u, err := url.Parse(to)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("nginx: -to must be a base URL, not %q", to)
	}
	dir, err := os.MkdirTemp("", "toolplane-load-nginx-")
	if err != nil {
		return nil, fmt.Errorf("nginx: %w", err)
	}
	// nginx cannot say which port a listen on port 0 took, so a free one
	// is picked here; another process could take it in between, hence
	// the few tries.
	var lastErr error
	for range 3 {
		n, err := startNginxOnce(ctx, binary, dir, u.Host)
		if err == nil {
			return n, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

func startNginxOnce(ctx context.Context, binary, dir, upstream string) (*Nginx, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("nginx: pick a port: %w", err)
	}
	listen := ln.Addr().String()
	ln.Close()
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(NginxConfig(dir, listen, upstream, 256)), 0o600); err != nil {
		return nil, fmt.Errorf("nginx: %w", err)
	}
	// -e points the error log nginx opens before reading its
	// configuration away from /var/log/nginx, which only root may write.
	cmd := exec.Command(binary, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("nginx: start %s: %w", binary, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stopProc := func() { interrupt(cmd, exited) }
	errLog := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		return strings.TrimSpace(out.String() + "\n" + string(b))
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		select {
		case <-exited:
			return nil, fmt.Errorf("nginx: exited before serving on %s: %s", listen, errLog())
		case <-ctx.Done():
			stopProc()
			return nil, fmt.Errorf("nginx: %w", ctx.Err())
		default:
		}
		if c, err := net.DialTimeout("tcp", listen, 200*time.Millisecond); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			stopProc()
			return nil, fmt.Errorf("nginx: not serving on %s within 10s: %s", listen, errLog())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &Nginx{URL: "http://" + listen, Dir: dir, pid: cmd.Process.Pid, stop: func() error {
		stopProc()
		return os.RemoveAll(dir)
	}}, nil
}
