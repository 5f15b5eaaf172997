//go:build !unix

package server

// noFollow is 0 where the system has no O_NOFOLLOW (Windows). There the
// credentials file is opened with O_CREATE|O_EXCL, which Go maps to
// CREATE_NEW: it fails when the name exists, a symbolic link included, so a
// planted link is refused as an existing file rather than followed.
const noFollow = 0
