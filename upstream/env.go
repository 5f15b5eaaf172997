package upstream

import (
	"runtime"
	"strings"
)

// inheritedEnv names the variables of toolplane's own environment a stdio
// server is started with: what a program needs to find itself and its
// files (a command found on PATH, npx's cache under HOME, the locale, the
// temporary directory), on POSIX systems and on Windows. Nothing else is
// passed on. toolplane's environment holds its own secrets (the sealing
// key, a database URL with its password, an operator's cloud
// credentials), and a server answers a model: a tool that echoes its
// environment would read them out. What a server needs beyond this list
// is named in its env, where ${NAME} takes it from toolplane's
// environment on purpose. (This keeps secrets out of a server's own
// environment; a server runs as toolplane's user, and one that means harm
// can read what that user can: run only servers you trust, or under a
// user or container of their own.)
var inheritedEnv = map[string]bool{
	"PATH": true, "HOME": true, "USER": true, "LOGNAME": true, "SHELL": true, "TERM": true,
	"LANG": true, "LC_ALL": true, "LC_CTYPE": true, "LC_MESSAGES": true, "TZ": true, "TMPDIR": true,
	// Where the host keeps what a program needs to reach anything over
	// TLS (a company's inspecting proxy's authority, for npx's or uvx's
	// download) and its per-user directories and container engine: paths,
	// not credentials. A proxy's address is not among them: it may carry
	// its password (http://user:pass@proxy), so a server that needs one
	// names it in its env.
	"SSL_CERT_FILE": true, "SSL_CERT_DIR": true, "NODE_EXTRA_CA_CERTS": true, "REQUESTS_CA_BUNDLE": true,
	"XDG_RUNTIME_DIR": true, "XDG_CACHE_HOME": true, "XDG_CONFIG_HOME": true, "XDG_DATA_HOME": true,
	"DOCKER_HOST": true, "DOCKER_CONTEXT": true, "DOCKER_CONFIG": true,
	// Windows spells its own; names are case-insensitive there, and
	// compared in upper case.
	"APPDATA": true, "LOCALAPPDATA": true, "HOMEDRIVE": true, "HOMEPATH": true, "USERPROFILE": true,
	"USERNAME": true, "SYSTEMROOT": true, "SYSTEMDRIVE": true, "WINDIR": true, "COMSPEC": true,
	"PATHEXT": true, "TEMP": true, "TMP": true, "PROGRAMFILES": true, "PROGRAMFILES(X86)": true,
	"PROGRAMDATA": true, "ALLUSERSPROFILE": true, "PROCESSOR_ARCHITECTURE": true, "NUMBER_OF_PROCESSORS": true, "OS": true,
}

// commandEnv answers the part of environ (NAME=value entries, as
// os.Environ gives them) a stdio server inherits: the entries inheritedEnv
// names. A value that starts with "()" is a shell function exported by
// bash, not a variable, and is left out too.
func commandEnv(environ []string) []string {
	env := make([]string, 0, len(inheritedEnv))
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if runtime.GOOS == "windows" {
			name = strings.ToUpper(name)
		}
		if !ok || !inheritedEnv[name] || strings.HasPrefix(value, "()") {
			continue
		}
		env = append(env, kv)
	}
	return env
}
