//go:build !(linux && (amd64 || arm64 || loong64 || ppc64le || s390x || riscv64 || 386 || arm))

package sqlite

// releaseRetained does nothing where libc's allocator is not the one
// memory_libc.go names.
func releaseRetained() error { return nil }
