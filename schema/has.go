package schema

// Holds reports whether args holds a value other than null at pointer,
// written as Sensitive writes them ("/*" standing for any element).
func Holds(args any, pointer string) bool {
	held := false
	ParsePointer(pointer).Each(args, func(v any) bool {
		held = v != nil
		return !held
	})
	return held
}
