package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolplane/toolplane"
)

// The keys come from the Config, never from the process's environment:
// a TOOLPLANE_KEK the Config does not carry is not read, Config.KEK is
// used without a key file, and Config.KEK beside KEKFile is refused
// before anything is opened.
func TestKeysComeFromTheConfig(t *testing.T) {
	t.Setenv(KEKEnv, "not a key") // read, it would fail the start
	key := make([]byte, 32)
	rand.Read(key)
	kek := base64.StdEncoding.EncodeToString(key)

	dir := t.TempDir()
	s, err := New(context.Background(), Config{Addr: "127.0.0.1:0", Database: filepath.Join(dir, "toolplane.db")})
	if err != nil {
		t.Fatalf("with TOOLPLANE_KEK set in the environment alone: %v", err)
	}
	s.Close()
	if _, err := os.Stat(filepath.Join(dir, "kek")); err != nil {
		t.Errorf("no key file made in the data directory: %v", err)
	}

	dir = t.TempDir()
	s, err = New(context.Background(), Config{Addr: "127.0.0.1:0", Database: filepath.Join(dir, "toolplane.db"), KEK: toolplane.SecretString("k1 " + kek)})
	if err != nil {
		t.Fatalf("with Config.KEK: %v", err)
	}
	s.Close()
	if _, err := os.Stat(filepath.Join(dir, "kek")); !os.IsNotExist(err) {
		t.Errorf("a key file was made beside Config.KEK: %v", err)
	}

	dir = t.TempDir()
	_, err = New(context.Background(), Config{Addr: "127.0.0.1:0", Database: filepath.Join(dir, "toolplane.db"), KEK: toolplane.SecretString("k1 " + kek), KEKFile: filepath.Join(dir, "kek")})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "KEKFile" || ce.Error() != "KEKFile: TOOLPLANE_KEK is set too; give the keys one way" {
		t.Errorf("KEK and KEKFile: %v, want a ConfigError of KEKFile", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "toolplane.db")); !os.IsNotExist(err) {
		t.Errorf("the database was opened: %v", err)
	}
}
