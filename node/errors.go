package node

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is a local request the node refuses: what went wrong, the HTTP
// status the control API answers with, and a hint for the operator.
// errors.Is matches it against [ErrBadRequest], [ErrNotFound] and
// [ErrForbidden] by its status, and against whatever Err wraps.
type Error struct {
	Status int    // an HTTP status: 400, 403, 404, 409
	Err    error  // what went wrong; its text is the answer's message
	Hint   string // what to do next, or ""
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// HTTPStatus returns the status the control API answers e with.
func (e *Error) HTTPStatus() int { return e.Status }

// OperatorHint returns the hint the control API answers e with.
func (e *Error) OperatorHint() string { return e.Hint }

// Is reports whether target is the sentinel of e's status.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrBadRequest:
		return e.Status == http.StatusBadRequest
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrForbidden:
		return e.Status == http.StatusForbidden
	}
	return false
}

// Sentinels for the kinds of [Error], for errors.Is.
var (
	ErrNotFound   = errors.New("not found")
	ErrForbidden  = errors.New("forbidden")
	ErrBadRequest = errors.New("bad request")
)

// Hints of the refusals that name something the node does not know.
const (
	hintChannels = "list channels with: meshctl channel list"
	hintMembers  = "list roster members with: meshctl roster show"
)

// refuse returns an [Error] with status and hint, its message formatted
// as by fmt.Errorf.
func refuse(status int, hint, format string, args ...any) error {
	return &Error{Status: status, Err: fmt.Errorf(format, args...), Hint: hint}
}

func badRequest(format string, args ...any) error {
	return refuse(http.StatusBadRequest, "", format, args...)
}

func forbidden(format string, args ...any) error {
	return refuse(http.StatusForbidden, "", format, args...)
}

func notFound(hint, format string, args ...any) error {
	return refuse(http.StatusNotFound, hint, format, args...)
}
