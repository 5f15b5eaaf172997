//go:build unix

package server

import "syscall"

// noFollow makes opening a path that is a symbolic link fail, so a link
// planted where first start writes its credentials is not followed.
const noFollow = syscall.O_NOFOLLOW
