package statuspage

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/meshd/meshd/node/home"
)

// The token travels as the query parameter tokenParam of the login URL,
// as a cookie (named per token, see cookieName) once the browser has
// opened that URL, or as "Authorization: Bearer TOKEN" for scripts.
const (
	tokenParam  = "token"
	minTokenLen = 32
	// cookiePrefix starts the cookie's name. Browsers send a host's
	// cookies to every port of that host, so the name carries a digest of
	// the token: two nodes on one host keep a cookie each.
	cookiePrefix = "meshd_ui_"
)

// NewToken returns a fresh random token: 32 bytes from crypto/rand,
// base64url without padding (43 characters).
func NewToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("status page token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// cookieName is the login cookie's name for this server's token.
func (s *Server) cookieName() string {
	d := sha256.Sum256([]byte("meshd status page cookie\x00" + s.cfg.Token))
	return cookiePrefix + hex.EncodeToString(d[:6])
}

// tokenOK compares got with the token in constant time.
func (s *Server) tokenOK(got string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.Token)) == 1
}

// authorized reports whether req shows the token. When it does not, or
// when it carries it in the query (a login: the answer sets the cookie
// and redirects to the same path without the token, so the token stays
// out of the page's address and its history entry), it has answered.
func (s *Server) authorized(w http.ResponseWriter, req *http.Request) bool {
	q := req.URL.Query()
	if q.Has(tokenParam) {
		if !s.tokenOK(q.Get(tokenParam)) {
			s.unauthorized(w, "the token in this address is not this meshd's (it changes at every start)")
			return false
		}
		http.SetCookie(w, &http.Cookie{
			Name:     s.cookieName(),
			Value:    s.cfg.Token,
			Path:     "/",
			HttpOnly: true,
			SameSite: http.SameSiteStrictMode,
		})
		q.Del(tokenParam)
		to := req.URL.Path
		if enc := q.Encode(); enc != "" {
			to += "?" + enc
		}
		w.Header().Set("Location", to)
		w.WriteHeader(http.StatusSeeOther)
		return false
	}
	if c, err := req.Cookie(s.cookieName()); err == nil && s.tokenOK(c.Value) {
		return true
	}
	if auth, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer "); ok && s.tokenOK(auth) {
		return true
	}
	s.unauthorized(w, "the status page needs its token: open the address that `meshctl ui` prints")
	return false
}

func (s *Server) unauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="meshd status page"`)
	writeError(w, http.StatusUnauthorized, msg)
}

// URLFile is the name, in the node's home, of the file that holds the
// login URL of the running node's status page (mode 0600, like the home's
// private key: whoever reads it reads the owner's messages). meshd writes
// it at start and removes it at exit; `meshctl ui` prints it.
const URLFile = "statuspage.url"

// ErrNoPage: the home has no status page URL file, so its meshd (if one
// runs) serves no status page.
var ErrNoPage = errors.New("no status page")

// WriteURLFile writes loginURL to dir's [URLFile], mode 0600, atomically.
func WriteURLFile(dir, loginURL string) error {
	if err := home.WriteFileAtomic(filepath.Join(dir, URLFile), []byte(loginURL+"\n"), 0o600); err != nil {
		return fmt.Errorf("status page url file: %w", err)
	}
	return nil
}

// RemoveURLFile removes dir's [URLFile]; a missing file is no error.
func RemoveURLFile(dir string) error {
	if err := os.Remove(filepath.Join(dir, URLFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("status page url file: %w", err)
	}
	return nil
}

// ReadURLFile returns the login URL in dir's [URLFile]. A missing file
// gives an error wrapping [ErrNoPage].
func ReadURLFile(dir string) (string, error) {
	path := filepath.Join(dir, URLFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%w: %s does not exist", ErrNoPage, path)
	}
	if err != nil {
		return "", fmt.Errorf("status page url file: %w", err)
	}
	u := strings.TrimSpace(string(b))
	if !strings.HasPrefix(u, "http://") || len(b) > 1024 {
		return "", fmt.Errorf("status page url file %s does not hold a URL: restart meshd to write it again", path)
	}
	return u, nil
}
