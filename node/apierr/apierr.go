// Package apierr is the error a local request is refused with: what went
// wrong, the HTTP status the control API answers with, and a hint for the
// operator. The node and its components (node/cards, ...) return it; the
// control server (node/control) reads the status and hint through the
// HTTPStatus and OperatorHint methods, without importing this package.
package apierr

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is a local request refused. errors.Is matches it against
// [ErrBadRequest], [ErrNotFound] and [ErrForbidden] by its status, and
// against whatever Err wraps.
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

// New returns an [Error] with status and hint, its message formatted as
// by fmt.Errorf.
func New(status int, hint, format string, args ...any) error {
	return &Error{Status: status, Err: fmt.Errorf(format, args...), Hint: hint}
}

// BadRequest is New with status 400 and no hint.
func BadRequest(format string, args ...any) error {
	return New(http.StatusBadRequest, "", format, args...)
}

// Forbidden is New with status 403 and no hint.
func Forbidden(format string, args ...any) error {
	return New(http.StatusForbidden, "", format, args...)
}

// NotFound is New with status 404.
func NotFound(hint, format string, args ...any) error {
	return New(http.StatusNotFound, hint, format, args...)
}
