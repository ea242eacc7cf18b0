package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/meshd/meshd/node/api"
)

// Text form of inbox items, shared by inbox and read. Each item starts
// with one header line:
//
//	* [high] 2026-11-21 12:00:01 request from alice (1a2b3c4d5e6f7a8b) to @bob: intent=run-tests hop=0 id=ID request_id=RID
//	  [normal] 2026-11-21 12:00:05 #deploys alice id=ID: v1.4.2 is live
//	* [normal] 2026-11-21 12:00:09 dm from carol (5e6f7a8b1a2b3c4d) to @bob id=ID: lunch?
//
// "*" marks an unread item. Params, results and bodies that do not fit on
// the header follow on lines indented by four spaces. In a listing, long
// content is cut short with a note to run 'meshctl read ID'.

// timeLayout is how items show their time, in the local zone.
const timeLayout = "2006-01-02 15:04:05"

// Preview limits for inbox listings; read shows everything.
const (
	inlineBytes  = 200  // longest body shown on the header line
	previewLines = 10   // lines of a body, params or result
	previewBytes = 2000 // bytes of a body, params or result
)

// writeItem writes it in the text form. full shows whole bodies, params
// and results; otherwise long ones are cut short.
func writeItem(w io.Writer, it *api.Item, full bool) error {
	var b strings.Builder
	if it.Read {
		b.WriteString("  ")
	} else {
		b.WriteString("* ")
	}
	when := it.Sent
	if when.IsZero() {
		when = it.Delivered
	}
	fmt.Fprintf(&b, "[%s] %s ", printable(it.Priority, false), when.Local().Format(timeLayout))

	var content, note string // indented content after the header, and a note for what was cut
	switch it.Kind {
	case "request":
		fmt.Fprintf(&b, "request from %s to %s: intent=%s", partyLabel(it.From), printable(it.To, false), fieldValue(it.Intent))
		if it.Hop != nil {
			fmt.Fprintf(&b, " hop=%d", *it.Hop)
		}
		fmt.Fprintf(&b, " id=%s request_id=%s", fieldValue(it.ID), fieldValue(it.RequestID))
		if it.ReplyTo != "" {
			fmt.Fprintf(&b, " reply_to=%s", fieldValue(it.ReplyTo))
		}
		b.WriteString(flags(it))
		content = indentJSON(it.Params)
	case api.KindDeliveryFailed:
		fmt.Fprintf(&b, "delivery failed: your %s to %s was %s", printable(it.FailedKind, false), printable(it.To, false), printable(it.Delivery, false))
		if it.Reason != "" {
			fmt.Fprintf(&b, " (%s)", printable(it.Reason, false))
		}
		fmt.Fprintf(&b, " id=%s", fieldValue(it.ID))
		if it.RequestID != "" {
			fmt.Fprintf(&b, " request_id=%s", fieldValue(it.RequestID))
		}
		if it.Intent != "" {
			fmt.Fprintf(&b, " intent=%s", fieldValue(it.Intent))
		}
		b.WriteString(flags(it))
		if body := strings.TrimRight(it.Body, "\n"); body != "" {
			b.WriteString(":")
			content = body
		}
	case api.KindSubagentResult:
		fmt.Fprintf(&b, "subagent %s finished id=%s%s: %s", fieldValue(it.SubagentID), fieldValue(it.ID), flags(it), printable(firstLine(it.Summary), false))
		content = strings.TrimRight(it.Summary, "\n")
		if !strings.Contains(content, "\n") {
			content = ""
		}
		if r := indentJSON(it.Result); r != "" {
			content = strings.TrimLeft(content+"\n"+r, "\n")
		}
	case "response":
		fmt.Fprintf(&b, "response from %s to %s: status=%s id=%s request_id=%s%s", partyLabel(it.From), printable(it.To, false),
			fieldValue(it.Status), fieldValue(it.ID), fieldValue(it.RequestID), flags(it))
		content = indentJSON(it.Result)
	default:
		switch {
		case it.Kind == "message" && isChannel(it):
			fmt.Fprintf(&b, "%s %s", printable(channelLabel(it), false), partyName(it.From))
		case it.Kind == "message":
			fmt.Fprintf(&b, "dm from %s to %s", partyLabel(it.From), printable(it.To, false))
		default:
			fmt.Fprintf(&b, "%s from %s to %s", printable(it.Kind, false), partyLabel(it.From), printable(it.To, false))
		}
		fmt.Fprintf(&b, " id=%s", fieldValue(it.ID))
		if it.InReplyTo != "" {
			fmt.Fprintf(&b, " in_reply_to=%s", fieldValue(it.InReplyTo))
		}
		b.WriteString(flags(it))
		body := strings.TrimRight(strings.ReplaceAll(it.Body, "\r\n", "\n"), "\n")
		switch {
		case body == "":
			b.WriteString(": (empty)")
		case !strings.ContainsAny(body, "\r\n") && len(body) <= inlineBytes:
			b.WriteString(": " + printable(body, false))
		default:
			b.WriteString(":")
			content = body
		}
	}
	b.WriteString("\n")

	if content != "" {
		if !full {
			content, note = preview(content, it.ID)
		}
		for line := range strings.SplitSeq(printable(content, true), "\n") {
			b.WriteString("    " + line + "\n")
		}
		if note != "" {
			b.WriteString("    " + note + "\n")
		}
	}
	for _, x := range it.Attachments {
		where := "not fetched: meshctl fetch " + it.ID
		if x.Path != "" {
			where = printable(x.Path, false)
		}
		fmt.Fprintf(&b, "    attachment %s (%d bytes, %s): %s\n", printable(x.Name, false), x.Size, printable(x.MediaType, false), where)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// isChannel reports whether it was sent to a channel.
func isChannel(it *api.Item) bool { return it.Channel != "" || strings.HasPrefix(it.To, "#") }

// channelLabel is "#name" for an item sent to a channel.
func channelLabel(it *api.Item) string {
	if it.Channel != "" {
		return "#" + strings.TrimPrefix(it.Channel, "#")
	}
	return it.To
}

// flags notes what is unusual about an item.
func flags(it *api.Item) string {
	var s string
	if it.Expired {
		s += " [expired]"
	}
	if it.FromHistory {
		s += " [from history]"
	}
	if it.Claim != nil {
		who := it.Claim.Worker
		if who == "" {
			who = "a worker"
		}
		s += fmt.Sprintf(" [claimed by %s until %s]", printable(who, false), it.Claim.Until.Local().Format("15:04:05"))
	}
	return s
}

// partyName is a party's roster name alone when it is unique, or else
// [partyLabel]: the fingerprint shows whenever the name does not
// identify the sender by itself.
func partyName(p api.Party) string {
	if p.Name != "" && !p.NameAmbiguous && nameText(p.Name) == p.Name {
		return p.Name
	}
	return partyLabel(p)
}

// partyLabel is "name (fingerprint)", or the fingerprint alone.
func partyLabel(p api.Party) string {
	if p.Name == "" {
		return printable(p.Fingerprint, false)
	}
	return nameText(p.Name) + " (" + printable(p.Fingerprint, false) + ")"
}

// fieldValue renders a key=value value, quoted when it is empty or holds
// a space, quote, '=' or anything unprintable, so fields stay unambiguous.
func fieldValue(s string) string {
	if s == "" || strings.ContainsAny(s, " \"'=") || printable(s, false) != s {
		return strconv.Quote(s)
	}
	return s
}

// indentJSON renders a params or result value indented by two spaces, or
// "" when there is none.
func indentJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

// preview cuts s to the listing limits and returns what it keeps and, if it
// cut anything, a note saying how much and how to see it all.
func preview(s, id string) (string, string) {
	cut := len(s)
	if n := previewBytes; cut > n {
		cut = n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
	}
	lines := 0
	for i := 0; i < cut; i++ {
		if s[i] == '\n' {
			lines++
			if lines == previewLines {
				cut = i
				break
			}
		}
	}
	if cut == len(s) {
		return s, ""
	}
	return s[:cut], fmt.Sprintf("... %d more bytes (meshctl read %s shows all)", len(s)-cut, quoteShell(printable(id, false)))
}

// printable makes text from peers safe to show in a terminal: control
// characters, bidirectional overrides, line separators and invalid UTF-8
// become Go escapes, so a message cannot move the cursor, recolour the
// screen or disguise itself. multiline keeps newlines and tabs.
func printable(s string, multiline bool) string {
	clean := true
	for _, r := range s {
		if !safeRune(r, multiline) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case safeRune(r, multiline):
			b.WriteRune(r)
		default:
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		}
		s = s[n:]
	}
	return b.String()
}

func safeRune(r rune, multiline bool) bool {
	switch {
	case r == utf8.RuneError:
		return false
	case multiline && (r == '\n' || r == '\t'):
		return true
	case unicode.IsControl(r), unicode.Is(unicode.Bidi_Control, r), r == '\u2028', r == '\u2029':
		return false
	}
	return true
}
