package secret_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/toolplane/toolplane/secret"
)

func TestDeriveKey(t *testing.T) {
	t.Parallel()
	text := "new " + newKey(t) + "\nold " + newKey(t) + "\n"
	a, err := secret.ParseKeyring(text)
	if err != nil {
		t.Fatal(err)
	}
	again, err := secret.ParseKeyring(text)
	if err != nil {
		t.Fatal(err)
	}
	k1, err := a.DeriveKey("new", "notify link")
	if err != nil {
		t.Fatal(err)
	}
	k2, _ := again.DeriveKey("new", "notify link")
	if !bytes.Equal(k1, k2) || len(k1) != 32 {
		t.Fatalf("the same key and purpose derive %x and %x", k1, k2)
	}
	other, _ := a.DeriveKey("new", "another purpose")
	old, _ := a.DeriveKey("old", "notify link")
	if bytes.Equal(k1, other) || bytes.Equal(k1, old) {
		t.Fatal("another purpose or key derives the same key")
	}
	if _, err := a.DeriveKey("gone", "notify link"); !errors.Is(err, secret.ErrUnknownKey) {
		t.Fatalf("unknown id: %v, want ErrUnknownKey", err)
	}
}
