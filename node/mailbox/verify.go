package mailbox

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// ErrMalformed is wrapped by every error about a mirror file that cannot
// be split into headers, body and armor block, or whose armor block does
// not hold a well-formed envelope.
var ErrMalformed = errors.New("malformed mailbox file")

// ErrMismatch is matched (with errors.Is) by every [*MismatchError].
var ErrMismatch = errors.New("mailbox file does not match its envelope")

// MismatchError says how a mirror file differs from the signed envelope it
// carries (or from the roster or channel policies, for names).
type MismatchError struct {
	// Field is a header name ("Date", "From-Key", ...), "From name" (the
	// name part of From, checked against the roster), "header order",
	// "body" or "armor".
	Field string
	// InFile is what the file says; empty if the header is missing.
	InFile string
	// InEnvelope is what the file should say; empty if the header should
	// not be there at all.
	InEnvelope string
	// Against names the authority of InEnvelope: "envelope" (the default),
	// "roster" or "channel policy".
	Against string
	// Line is, for the body, the 1-based line of the body where the first
	// difference is.
	Line int
}

func (e *MismatchError) Error() string {
	against := e.Against
	if against == "" {
		against = "envelope"
	}
	switch {
	case e.Field == "body":
		return fmt.Sprintf("body line %d differs from the envelope: the file has %s, the envelope has %s",
			e.Line, quoteLine(e.InFile), quoteLine(e.InEnvelope))
	case e.Field == "header order":
		return fmt.Sprintf("headers out of order: the file has %s, the envelope gives %s", e.InFile, e.InEnvelope)
	case e.Field == "armor":
		return "armor block is not in its canonical form (" + e.InEnvelope + ")"
	case e.Field == "From name":
		return fmt.Sprintf("sender name in header From: the file says %q, the %s says %q", e.InFile, against, e.InEnvelope)
	case e.Field == "Message-ID" && e.InFile != "" && e.InEnvelope != "":
		return fmt.Sprintf("header Message-ID: the file says %q, the envelope says %q: the armor block is another message's", e.InFile, e.InEnvelope)
	case e.InFile == "":
		return fmt.Sprintf("header %s is missing: the %s says %q", e.Field, against, e.InEnvelope)
	case e.InEnvelope == "":
		return fmt.Sprintf("header %s: %q is not in the %s", e.Field, e.InFile, against)
	}
	return fmt.Sprintf("header %s: the file says %q, the %s says %q", e.Field, e.InFile, against, e.InEnvelope)
}

// Is makes errors.Is(err, [ErrMismatch]) true.
func (e *MismatchError) Is(target error) bool { return target == ErrMismatch }

// endOfBody stands for a body line that is not there.
const endOfBody = "\x00end"

func quoteLine(s string) string {
	if s == endOfBody {
		return "the end of the body"
	}
	const max = 80
	if len(s) > max {
		return fmt.Sprintf("%q...", s[:max])
	}
	return fmt.Sprintf("%q", s)
}

// VerifyOptions are what [Verify] checks names against. Either may be nil.
type VerifyOptions struct {
	// Roster checks the sender's name, and a peer destination's name.
	Roster *roster.Roster
	// Channels checks a channel destination's name.
	Channels *channel.Set
}

// Verified describes a mirror file that [Verify] accepted.
type Verified struct {
	Env *proto.SignedEnvelope
	// Signer is the key that signed the envelope: its from.
	Signer proto.PubKey
	// Name is the sender's name: the roster's if the roster was given and
	// lists the sender, otherwise the name the file states ("" for "-").
	Name string
	// Role is the sender's role in the given roster; 0 if unknown.
	Role roster.Role
	// To is the To header as verified (or, where Unchecked says so, as the
	// file states it).
	To string
	// Priority and FromHistory are the Priority and Source headers: local
	// annotations of the receiving node, well formed but not signed.
	Priority    string
	FromHistory bool
	// Failure is the Delivery and Delivery-Reason headers of a
	// delivery_failed item: the local node's word, not signed.
	Failure *Failure
	// Unsigned lists the headers present that the signature does not
	// cover: "Priority", "Source" and "Delivery".
	Unsigned []string
	// Unchecked lists what could not be checked, with the reason: the
	// sender's name without a roster, a destination's name without a
	// roster or channel policies.
	Unchecked []string
}

// Verify checks a mirror file offline: the armor block must hold a
// well-formed envelope (else the error wraps [ErrMalformed]) whose
// signature verifies (else it wraps [proto.ErrBadSignature]), and the
// headers, body and armor block must be exactly what [Render] makes of
// that envelope (else a [*MismatchError] says what differs first). See the
// package documentation for what is checked against opts.
func Verify(file []byte, opts VerifyOptions) (*Verified, error) {
	p, err := splitFile(file)
	if err != nil {
		return nil, err
	}
	se, err := proto.ParseEnvelope(p.raw)
	if err != nil {
		return nil, fmt.Errorf("%w: armor block: %w", ErrMalformed, err)
	}
	if err := se.Verify(); err != nil {
		return nil, fmt.Errorf("envelope %s claiming to be from %s: %w", se.ID, se.From.Fingerprint(), err)
	}
	fh := map[string]string{}
	for _, h := range p.headers {
		if _, dup := fh[h.name]; dup {
			return nil, fmt.Errorf("%w: header %s appears twice", ErrMalformed, h.name)
		}
		fh[h.name] = h.value
	}
	v := &Verified{Env: se, Signer: se.From}
	it := Item{Env: se}

	// Local annotations: taken from the file, but well formed.
	if prio, ok := fh["Priority"]; ok {
		if !validPriority(prio) {
			return nil, fmt.Errorf("%w: header Priority %q (want high, normal or low)", ErrMalformed, prio)
		}
		it.Priority, v.Priority = prio, prio
		v.Unsigned = append(v.Unsigned, "Priority")
	}
	if src, ok := fh["Source"]; ok {
		if src != sourceHistory {
			return nil, fmt.Errorf("%w: header Source %q (want %s)", ErrMalformed, src, sourceHistory)
		}
		it.FromHistory, v.FromHistory = true, true
		v.Unsigned = append(v.Unsigned, "Source")
	}

	if st, ok := fh["Delivery"]; ok {
		if !validFailure(st) {
			return nil, fmt.Errorf("%w: header Delivery %q (want expired or refused)", ErrMalformed, st)
		}
		it.Failure = &Failure{State: st, Reason: fh["Delivery-Reason"]}
		v.Failure = it.Failure
		v.Unsigned = append(v.Unsigned, "Delivery")
	}

	// Names: from the roster and the channel policies when given, else as
	// the file states them (and reported unchecked).
	fileName, _, nameOK := splitFrom(fh["From"])
	if fileName == "-" {
		fileName = ""
	}
	nameAgainst := ""
	switch m, ok := member(opts.Roster, se.From); {
	case ok:
		it.FromName, v.Name, v.Role = m.Name, m.Name, m.Role
		nameAgainst = "roster"
	default:
		if nameOK {
			it.FromName, v.Name = fileName, fileName
		}
		why := "no roster"
		if opts.Roster != nil {
			why = "the sender is not in the roster"
		}
		v.Unchecked = append(v.Unchecked, "From name ("+why+")")
	}
	toAgainst, unchecked := expectTo(&it, fh["To"], se, opts)
	if unchecked != "" {
		v.Unchecked = append(v.Unchecked, unchecked)
	}

	hs, body, err := render(it)
	if err != nil {
		return nil, err
	}
	if err := compareHeaders(p.headers, fh, hs, se.From.Fingerprint(), nameAgainst, toAgainst); err != nil {
		return nil, err
	}
	if err := compareBody(p.body, bodyRegion(body)); err != nil {
		// A file written before bodies were escaped holds the text as
		// it is; the envelope says the same.
		raw, rerr := renderRawBody(&it.Env.Envelope)
		if rerr != nil || raw == body || compareBody(p.body, bodyRegion(raw)) != nil {
			return nil, err
		}
	}
	if want := armor(se.Raw); p.armor != want {
		return nil, &MismatchError{Field: "armor", InEnvelope: armorDiff(p.armor, want)}
	}
	v.To = fh["To"]
	return v, nil
}

func member(r *roster.Roster, k proto.PubKey) (roster.Member, bool) {
	if r == nil {
		return roster.Member{}, false
	}
	return r.Member(k)
}

// splitFrom splits a From value "name (fingerprint)" into its parts; the
// name is "-" for none. ok is false if the value is not of that form.
func splitFrom(v string) (name, fp string, ok bool) {
	i := strings.LastIndex(v, " (")
	if i < 0 || !strings.HasSuffix(v, ")") {
		return "", "", false
	}
	return v[:i], v[i+2 : len(v)-1], true
}

// expectTo sets it.ToText to what the To header must say: the name from
// the channel policies or the roster, else the name in the file, unless
// the file gives the destination by id (or with the wrong sigil), which is
// then checked against the envelope. It returns the
// authority of that value ("" for the envelope) and, if the name could not
// be checked, why.
func expectTo(it *Item, fileTo string, se *proto.SignedEnvelope, opts VerifyOptions) (against, unchecked string) {
	switch se.To.Kind {
	case proto.DestChannel:
		if opts.Channels != nil {
			if p, ok := opts.Channels.ByID(se.To.Channel); ok {
				it.ToText = "#" + p.Name
				return "channel policy", ""
			}
		}
		if len(fileTo) < 2 || fileTo[0] != '#' || isUUID(fileTo[1:]) {
			// Checked exactly, or wrong anyway: the comparison reports it.
			return "", ""
		}
		it.ToText = fileTo
		if opts.Channels == nil {
			return "", "To name (no channel policies)"
		}
		return "", "To name (the channel is not in the local policies)"
	case proto.DestPeer:
		if m, ok := member(opts.Roster, se.To.Peer); ok {
			it.ToText = ""
			if m.Name != "" {
				it.ToText = "@" + m.Name
			}
			return "roster", ""
		}
		if len(fileTo) < 2 || fileTo[0] != '@' || isFingerprint(fileTo[1:]) {
			return "", ""
		}
		it.ToText = fileTo
		if opts.Roster == nil {
			return "", "To name (no roster)"
		}
		return "", "To name (the peer is not in the roster)"
	}
	return "", ""
}

// isUUID reports whether s is a channel id in its text form: a "#" that
// names one is checked against the envelope, not taken as a name.
func isUUID(s string) bool {
	_, err := uuid.Parse(s)
	return err == nil && len(s) == 36
}

// isFingerprint reports whether s has the form of a fingerprint, 16
// lowercase hex digits: an "@" that names one is checked against the
// envelope, not taken as a name.
func isFingerprint(s string) bool {
	if len(s) != 16 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// compareHeaders reports the first difference between the file's headers
// and the expected ones. The Message-ID, From-Key and From headers go
// first: a file carrying another message's armor block, or claiming
// another sender, is best told so.
func compareHeaders(file []header, fh map[string]string, want []header, fp, nameAgainst, toAgainst string) error {
	wm := make(map[string]string, len(want))
	for _, h := range want {
		wm[h.name] = h.value
	}
	check := func(h header) error {
		got, ok := fh[h.name]
		switch {
		case ok && got == h.value:
			return nil
		case h.name == "From" && ok && nameAgainst != "":
			// Same fingerprint, other name: the name is what differs.
			gotName, gotFP, gotOK := splitFrom(got)
			wantName, _, _ := splitFrom(h.value)
			if gotOK && gotFP == fp {
				return &MismatchError{Field: "From name", InFile: gotName, InEnvelope: wantName, Against: nameAgainst}
			}
		case h.name == "To" && ok && toAgainst != "":
			return &MismatchError{Field: "To", InFile: got, InEnvelope: h.value, Against: toAgainst}
		}
		return &MismatchError{Field: h.name, InFile: got, InEnvelope: h.value}
	}
	for _, name := range []string{"Message-ID", "From-Key", "From"} {
		if err := check(header{name, wm[name]}); err != nil {
			return err
		}
	}
	for _, h := range want {
		if err := check(h); err != nil {
			return err
		}
	}
	for _, h := range file {
		if _, ok := wm[h.name]; !ok {
			return &MismatchError{Field: h.name, InFile: h.value}
		}
	}
	for i := range want {
		if file[i].name != want[i].name {
			return &MismatchError{Field: "header order", InFile: names(file), InEnvelope: names(want)}
		}
	}
	return nil
}

func names(hs []header) string {
	ns := make([]string, len(hs))
	for i, h := range hs {
		ns[i] = h.name
	}
	return strings.Join(ns, ", ")
}

// compareBody reports the first line where the file's body region differs
// from the expected one.
func compareBody(got, want string) error {
	if got == want {
		return nil
	}
	gl, wl := strings.SplitAfter(got, "\n"), strings.SplitAfter(want, "\n")
	for i := 0; ; i++ {
		g, w := endOfBody, endOfBody
		if i < len(gl) && gl[i] != "" {
			g = gl[i]
		}
		if i < len(wl) && wl[i] != "" {
			w = wl[i]
		}
		if g != w {
			return &MismatchError{Field: "body", InFile: g, InEnvelope: w, Line: i + 1}
		}
	}
}

// armorDiff says how an armor block that decodes to the right envelope
// differs from the canonical one.
func armorDiff(got, want string) string {
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(gl) && i < len(wl); i++ {
		if gl[i] != wl[i] {
			return fmt.Sprintf("line %d of the block: want %d-character lines of base64 and the end line last", i+1, armorWidth)
		}
	}
	return "want exactly one newline after the end line"
}

// fileParts is a mirror file split into its parts.
type fileParts struct {
	headers []header
	body    string // the body region
	armor   string // the armor block, from its begin line to the end
	raw     []byte // the envelope decoded from the armor block
}

// splitFile splits a mirror file as the package documentation says.
func splitFile(file []byte) (*fileParts, error) {
	begin := []byte("\n" + ArmorBegin + "\n")
	i := bytes.LastIndex(file, begin)
	if i < 0 {
		return nil, fmt.Errorf("%w: no %s line", ErrMalformed, ArmorBegin)
	}
	p := &fileParts{armor: string(file[i+1:])}
	head := string(file[:i+1])

	// Armor: base64 lines, then the end line, then nothing.
	rest := p.armor[len(ArmorBegin)+1:]
	var b64 strings.Builder
	for line := 1; ; line++ {
		if rest == "" {
			return nil, fmt.Errorf("%w: armor block has no %s line (truncated?)", ErrMalformed, ArmorEnd)
		}
		l, after, _ := strings.Cut(rest, "\n")
		rest = after
		if l == ArmorEnd {
			if rest != "" {
				return nil, fmt.Errorf("%w: %d bytes after the %s line", ErrMalformed, len(rest), ArmorEnd)
			}
			break
		}
		b64.WriteString(l)
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(b64.String())
	if err != nil {
		return nil, fmt.Errorf("%w: armor block: bad base64: %w", ErrMalformed, err)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("%w: armor block is empty", ErrMalformed)
	}
	p.raw = raw

	// Headers up to the first "---" line; the body after it.
	for n := 1; ; n++ {
		if head == "" {
			return nil, fmt.Errorf("%w: no %q line after the headers", ErrMalformed, headerSep)
		}
		l, after, _ := strings.Cut(head, "\n")
		head = after
		if l == headerSep {
			break
		}
		name, value, ok := strings.Cut(l, ": ")
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return nil, fmt.Errorf("%w: line %d: %q is not a header (want Name: value)", ErrMalformed, n, l)
		}
		p.headers = append(p.headers, header{name, value})
	}
	if len(p.headers) == 0 {
		return nil, fmt.Errorf("%w: no headers", ErrMalformed)
	}
	p.body = head
	return p, nil
}
