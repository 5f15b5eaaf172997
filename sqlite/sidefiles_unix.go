//go:build unix

package sqlite

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// wOK is access(2)'s W_OK, the same on every Unix.
const wOK = 0x2

// checkSideFiles refuses the -wal and -shm files beside the database file
// at path that another user owns or this process cannot write, and a
// database file it cannot write. They are looked at by name, never opened
// (see private). An owner other than the database file's comes from
// another user's process (a sqlite3 run as another user while the node was
// stopped, a restore, a copy); SQLite itself, run as root, gives the files
// it creates the database file's owner.
func checkSideFiles(path string) error {
	var db syscall.Stat_t
	if err := syscall.Stat(path, &db); err != nil {
		return err
	}
	if err := syscall.Access(path, wOK); err != nil {
		return fmt.Errorf("%w: %s is not writable by this process (uid %d): give it back to the user toolplane runs as", ErrSideFile, path, os.Geteuid())
	}
	for _, p := range []string{path + "-wal", path + "-shm"} {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); errors.Is(err, syscall.ENOENT) {
			continue
		} else if err != nil {
			return err
		}
		if st.Uid != db.Uid {
			return fmt.Errorf("%w: %s is owned by uid %d, the database file by uid %d; another user's process made it. Stop every process using the database, then `chown %d %s` (never delete it: it may hold committed writes)",
				ErrSideFile, p, st.Uid, db.Uid, db.Uid, p)
		}
		if err := syscall.Access(p, wOK); err != nil {
			return fmt.Errorf("%w: %s is not writable by this process (uid %d): stop every process using the database, then give it back to the user toolplane runs as (never delete it: it may hold committed writes)",
				ErrSideFile, p, os.Geteuid())
		}
	}
	return nil
}
