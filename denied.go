package toolplane

// DeniedError is an operation a service refused to the credential it was
// given: Why says what the operation needs, in words a person reads (a door
// shows it as it is), and Err is the refusing service's own sentinel
// (approval.ErrNotAuthorized, ...), a refinement of ErrForbidden, which
// errors.Is finds through it. Every
// service answers its refusals in this one form, so a door translates them
// without knowing any service's rules.
type DeniedError struct {
	Why string
	Err error
}

// Refuse answers the refusal of an operation to c; why says what the
// operation needs. A credential that is not a person's is also told that
// roles are carried by a person's key: an agent's key holds none, and its
// holder would otherwise be left to guess which key the operation takes.
func Refuse(c *Credential, sentinel error, why string) *DeniedError {
	if c != nil && c.Kind != CredentialPerson {
		why += "; this is an agent's key, and roles are carried by a person's key"
	}
	return &DeniedError{Why: why, Err: sentinel}
}

func (e *DeniedError) Error() string { return e.Why }

// Unwrap answers the refusing service's sentinel, a refinement of
// ErrForbidden; ErrForbidden itself when none was named.
func (e *DeniedError) Unwrap() error {
	if e.Err == nil {
		return ErrForbidden
	}
	return e.Err
}
