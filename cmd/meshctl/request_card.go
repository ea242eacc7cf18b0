package main

import (
	"context"
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
	warn, err := cardIntentWarning(ctx, a.client(), peer, intent, strict)
	if err != nil {
		return a.remoteErr(err)
	}
	if warn != "" {
		fmt.Fprintf(a.Stderr, "warning: %s; sending anyway\n", warn)
	}
	return nil
}

// errStrictCard marks a request that strict refused for peer's card.
var errStrictCard = errors.New("--strict")

// cardIntentWarning returns what is wrong with asking peer for intent,
// going by its card: "" when the card lists it or (without strict) the
// peer publishes none. With strict the finding is an error wrapping
// errStrictCard instead.
func cardIntentWarning(ctx context.Context, c *api.Client, peer, intent string, strict bool) (string, error) {
	card, err := c.CardOf(ctx, peer)
	var re *api.RemoteError
	switch {
	case errors.As(err, &re) && re.Status == http.StatusNotFound && !strict:
		return "", nil
	case errors.As(err, &re) && re.Status == http.StatusNotFound:
		return "", fmt.Errorf("%w: %s publishes no card, so it lists no intent %s", errStrictCard, printable(peer, false), fieldValue(intent))
	case err != nil:
		return "", err
	}
	if card.Serves(intent) {
		return "", nil
	}
	what := fmt.Sprintf("%s's card does not list intent %s (it lists: %s)", orDash(printable(card.Name, false)), fieldValue(intent), intentList(card))
	if card.Cleared {
		what = fmt.Sprintf("%s cleared its card: it serves no intent", orDash(printable(card.Name, false)))
	}
	if strict {
		return "", fmt.Errorf("%w: %s", errStrictCard, what)
	}
	return what, nil
}
