//go:build unix

package secret

import (
	"fmt"
	"syscall"
)

// noFollow makes opening a path that is a symbolic link fail, so a link
// planted where the key file is created does not capture the key.
const noFollow = syscall.O_NOFOLLOW

// checkPrivate refuses a file of secrets (what, at path) that anyone but
// its owner may read or write, as ssh refuses such a private key: a
// key-encryption key opens every connection's secret, a Vault token
// reads them. The error wraps kind.
func checkPrivate(kind error, what, path string, mode uint32) error {
	if mode&0o077 != 0 {
		return fmt.Errorf("%w: %s %s is accessible by group or others (mode %#o): run chmod 600 %s",
			kind, what, path, mode&0o777, path)
	}
	return nil
}
