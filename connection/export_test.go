package connection

// Remembering reports whether the broker trusts what it kept of the store
// now: tests wait for it before they count on the memory.
func (s *Broker) Remembering() bool {
	s.mem.mu.RLock()
	defer s.mem.mu.RUnlock()
	return s.mem.trusted()
}
