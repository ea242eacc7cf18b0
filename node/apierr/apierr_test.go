package apierr

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
)

// TestErrorKinds: a refusal matches the sentinel of its status and what
// it wraps, and carries its status and hint to the control API.
func TestErrorKinds(t *testing.T) {
	nf := NotFound("list items with: meshctl inbox", "no inbox item %s: %w", "x", io.EOF)
	if !errors.Is(nf, ErrNotFound) || errors.Is(nf, ErrBadRequest) || !errors.Is(nf, io.EOF) {
		t.Fatalf("not found: %v", nf)
	}
	wrapped := fmt.Errorf("claim: %w", nf)
	var st interface{ HTTPStatus() int }
	var h interface{ OperatorHint() string }
	if !errors.As(wrapped, &st) || st.HTTPStatus() != http.StatusNotFound || !errors.As(wrapped, &h) || h.OperatorHint() == "" {
		t.Fatalf("status or hint lost: %v", wrapped)
	}
	if !errors.Is(BadRequest("x"), ErrBadRequest) || !errors.Is(Forbidden("x"), ErrForbidden) {
		t.Fatal("bad request or forbidden not matched")
	}
	if c := New(http.StatusConflict, "", "x"); errors.Is(c, ErrBadRequest) || errors.Is(c, ErrNotFound) || errors.Is(c, ErrForbidden) {
		t.Fatal("a conflict matched another kind")
	}
}
