// Package toolplane holds the domain of the tool control plane: what a tool is
// (Definition), what a call answers (Result, Error) and the stable codes a
// model reads. It imports no infrastructure; every mechanism (schema
// validation, the result boundary, storage, the invoker) lives in a package of
// its own and speaks in these types.
package toolplane
