package main

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/meshd/meshd/node/api"
)

// checkCardIntent looks up peer's card before a request for intent. A
// card that does not list intent gets a warning on stderr; with strict,
// the request is refused instead, as it is when the peer publishes no
// card. Without strict, a peer with no card is asked as before.
func (a *app) checkCardIntent(peer, intent string, strict bool) error {
	ctx, cancel := a.ctx()
	defer cancel()
	c, err := a.client().CardOf(ctx, peer)
	var re *api.RemoteError
	switch {
	case errors.As(err, &re) && re.Status == http.StatusNotFound && !strict:
		return nil
	case errors.As(err, &re) && re.Status == http.StatusNotFound:
		return fmt.Errorf("--strict: %s publishes no card, so it lists no intent %s", printable(peer, false), fieldValue(intent))
	case err != nil:
		return a.remoteErr(err)
	}
	if c.Serves(intent) {
		return nil
	}
	what := fmt.Sprintf("%s's card does not list intent %s (it lists: %s)", orDash(printable(c.Name, false)), fieldValue(intent), intentList(c))
	if c.Cleared {
		what = fmt.Sprintf("%s cleared its card: it serves no intent", orDash(printable(c.Name, false)))
	}
	if strict {
		return fmt.Errorf("--strict: %s", what)
	}
	fmt.Fprintf(a.Stderr, "warning: %s; sending anyway\n", what)
	return nil
}
