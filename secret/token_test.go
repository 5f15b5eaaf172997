package secret_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/secret"
)

type grant struct {
	Key  string `json:"k"`
	What string `json:"w"`
}

func (g *grant) KeyID() string { return g.Key }

// A signed token opens for its purpose under the key it names, while the
// ring holds that key; altered, of another purpose, too long, or signed
// by a key retired from the ring, it is ErrToken and decodes nothing
// trusted.
func TestSignedToken(t *testing.T) {
	t.Parallel()
	k := ring(t, "k1", "k2")
	tok, err := k.SignToken("test purpose", &grant{Key: "k1", What: "approve apr_1"})
	if err != nil {
		t.Fatal(err)
	}
	var got grant
	if err := k.OpenToken("test purpose", tok, 1024, &got); err != nil || got.What != "approve apr_1" {
		t.Fatalf("OpenToken = %+v, %v", got, err)
	}
	payload, mac, _ := strings.Cut(tok, ".")
	forged, _ := k.SignToken("test purpose", &grant{Key: "k1", What: "approve apr_2"})
	forgedPayload, _, _ := strings.Cut(forged, ".")
	retired := ring(t, "k2")
	for _, c := range []struct {
		name  string
		ring  *secret.Keyring
		purp  string
		token string
		max   int
	}{
		{"another purpose", k, "other purpose", tok, 1024},
		{"another payload under the signature", k, "test purpose", forgedPayload + "." + mac, 1024},
		{"no signature", k, "test purpose", payload, 1024},
		{"not base64", k, "test purpose", "!!." + mac, 1024},
		{"too long", k, "test purpose", tok, len(tok) - 1},
		{"its key retired", retired, "test purpose", tok, 1024},
	} {
		var v grant
		if err := c.ring.OpenToken(c.purp, c.token, c.max, &v); !errors.Is(err, secret.ErrToken) {
			t.Errorf("%s: %v, want ErrToken", c.name, err)
		}
	}
}
