package jobs

// Rest answers whether r's River client rests, and how many times it
// started (see rest.go).
func Rest[TTx any](r *Runner[TTx]) (resting bool, starts int64) {
	if r.k == nil {
		return false, 0
	}
	return r.k.resting.Load(), r.k.starts.Load()
}
