package node

import "github.com/meshd/meshd/node/apierr"

// Error is a local request the node refuses: what went wrong, the HTTP
// status the control API answers with, and a hint for the operator
// (node/apierr, which the node's components return too).
type Error = apierr.Error

// Sentinels for the kinds of [Error], for errors.Is.
var (
	ErrNotFound   = apierr.ErrNotFound
	ErrForbidden  = apierr.ErrForbidden
	ErrBadRequest = apierr.ErrBadRequest
)

// Hints of the refusals that name something the node does not know.
const (
	hintChannels = "list channels with: meshctl channel list"
	hintMembers  = "list roster members with: meshctl roster show"
)

var (
	refuse     = apierr.New
	badRequest = apierr.BadRequest
	notFound   = apierr.NotFound
)
