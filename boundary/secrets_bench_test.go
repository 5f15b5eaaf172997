package boundary_test

import (
	"testing"

	"github.com/toolplane/toolplane/boundary"
)

// BenchmarkRedactSecrets scans strings of the kinds an answer holds, none
// of them a credential: the cost every string of every answer pays.
func BenchmarkRedactSecrets(b *testing.B) {
	in := []string{
		"Person Number 00042", "person00042@example.com", "2024-05-01T12:00:00Z",
		"Met at the spring conference; follow up about the renewal.",
		"The quick brown fox jumps over the lazy dog, and then it rests by the river bank for a while.",
	}
	n := 0
	for _, s := range in {
		n += len(s)
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		for _, s := range in {
			boundary.RedactSecrets(s)
		}
	}
}

// BenchmarkRedactSecretsSeparators scans strings that hold separators,
// none of them naming a credential: timestamps, URLs, a log line. They pay
// for the rule on names in text as well as the shapes.
func BenchmarkRedactSecretsSeparators(b *testing.B) {
	in := []string{
		"2024-05-01T12:00:00Z", "https://api.example.com/v1/people?page=2&per_page=50",
		"status: ok, took: 12ms, retries: 0", `{"id": "p-1", "max_tokens": 100}`,
		"postgres://db.internal:5432/app?sslmode=require",
	}
	n := 0
	for _, s := range in {
		n += len(s)
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		for _, s := range in {
			boundary.RedactSecrets(s)
		}
	}
}
