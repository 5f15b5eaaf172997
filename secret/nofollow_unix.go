//go:build unix

package secret

import (
	"fmt"
	"syscall"
)

// noFollow makes opening a path that is a symbolic link fail, so a link
// planted where the key file is created does not capture the key.
const noFollow = syscall.O_NOFOLLOW

// checkPrivate refuses a key file that anyone but its owner may read or
// write, as ssh refuses such a private key: the key-encryption key opens
// every connection's secret.
func checkPrivate(path string, mode uint32) error {
	if mode&0o077 != 0 {
		return fmt.Errorf("%w: key file %s is accessible by group or others (mode %#o): run chmod 600 %s",
			ErrKeyring, path, mode&0o777, path)
	}
	return nil
}
