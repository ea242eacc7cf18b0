package main

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/meshd/meshd/node/statuspage"
)

const usageUI = `usage: meshctl ui [--json]

Print the address that opens the running meshd's status page (meshd
--http) in a browser. The address carries a token that meshd makes afresh
at each start and keeps only in <home>/statuspage.url (mode 0600): the
page shows every message, so only the node's owner may read it. Opening
the address logs the browser in with a cookie and drops the token from
the address bar. A request without the token gets 401 and no data.

Keep the address to yourself, as you would the node's key: anyone who has
it reads your messages until meshd restarts.

Keep the token off command lines: every local user reads the arguments
of every process (/proc/*/cmdline, ps), so 'xdg-open "$(meshctl ui)"' or
'curl -H "Authorization: Bearer $(...)"' would show it to them. Paste the
address into the browser, or hand it over through a pipe or an
owner-only file, as below.

examples:
  meshctl ui                       (then paste the address into the browser)

  # open it through an owner-only file (only its path is an argument; rm it after)
  f=$(mktemp --suffix=.html) && meshctl ui --json |
    jq -r '"<meta http-equiv=refresh content=\"0;url=" + .url + "\">"' >"$f" && xdg-open "$f"

  # curl reads the header from its standard input (-K -), not from argv
  meshctl ui --json | jq -r '"header = \"Authorization: Bearer " + .token + "\""' |
    curl -sK - http://127.0.0.1:8080/api/state
`

// uiResult is what ui reports.
type uiResult struct {
	URL     string `json:"url"`
	Address string `json:"address"`
	Token   string `json:"token"`
}

func runUI(a *app, _ *noFlags, pos []string) error {
	if err := a.nargs(pos, 0, 0); err != nil {
		return err
	}
	// A meshd must answer first: a file left by one that crashed holds a
	// dead token.
	ctx, cancel := a.ctx()
	defer cancel()
	if _, err := a.client().Status(ctx); err != nil {
		return a.remoteErr(err)
	}
	login, err := statuspage.ReadURLFile(a.home().Dir)
	if errors.Is(err, statuspage.ErrNoPage) {
		return withHint(fmt.Errorf("meshd serves no status page: %w", err),
			"start meshd with --http 127.0.0.1:8080 (or http = \"127.0.0.1:8080\" in meshd.toml)")
	}
	if err != nil {
		return err
	}
	u, err := url.Parse(login)
	if err != nil {
		return fmt.Errorf("status page url file: %w", err)
	}
	res := uiResult{URL: login, Token: u.Query().Get("token")}
	u.RawQuery = ""
	res.Address = u.String()
	if a.json {
		return a.printJSON(res)
	}
	fmt.Fprintln(a.Stdout, res.URL)
	return nil
}
