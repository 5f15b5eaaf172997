package console

// PagesParsed reports whether c parsed its page templates.
func PagesParsed(c *Console) bool { return c.parsed.Load() }
