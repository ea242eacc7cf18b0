package main

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/width"
)

// colWriter lays out tab-separated cells in columns like text/tabwriter
// (minimum width 0, padding 2, blank padding, column blocks of adjacent
// lines), but measures cells in terminal columns rather than runes: an
// emoji or a CJK character takes two, a combining mark or a zero-width
// joiner none, and a joined emoji sequence counts as one. So tables keep their columns with names like "测试机" or
// "build 🚀". Write buffers; Flush lays out and writes everything.
type colWriter struct {
	w   io.Writer
	buf bytes.Buffer
}

// table returns a column writer on w; call Flush when done.
func table(w io.Writer) *colWriter { return &colWriter{w: w} }

func (c *colWriter) Write(p []byte) (int, error) { return c.buf.Write(p) }

// Flush writes the buffered lines with their cells padded into columns.
func (c *colWriter) Flush() error {
	text := c.buf.String()
	c.buf.Reset()
	if text == "" {
		return nil
	}
	trailingNL := strings.HasSuffix(text, "\n")
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	cells := make([][]string, len(lines)) // tab-terminated cells of each line
	rest := make([]string, len(lines))    // the text after the last tab
	for i, l := range lines {
		parts := strings.Split(l, "\t")
		cells[i], rest[i] = parts[:len(parts)-1], parts[len(parts)-1]
	}
	widths := make([][]int, len(lines))
	for i := range widths {
		widths[i] = make([]int, len(cells[i]))
	}
	layoutColumns(cells, widths, 0, 0, len(lines))
	var out strings.Builder
	for i := range lines {
		for j, cell := range cells[i] {
			out.WriteString(cell)
			out.WriteString(strings.Repeat(" ", widths[i][j]-displayWidth(cell)))
		}
		out.WriteString(rest[i])
		if i < len(lines)-1 || trailingNL {
			out.WriteByte('\n')
		}
	}
	_, err := io.WriteString(c.w, out.String())
	return err
}

// layoutColumns sets the width of column col for each block of adjacent
// lines in [lo, hi) that have a cell there, then lays out the next column
// within each block, as text/tabwriter does.
func layoutColumns(cells [][]string, widths [][]int, col, lo, hi int) {
	for i := lo; i < hi; {
		if len(cells[i]) <= col {
			i++
			continue
		}
		j, w := i, 0
		for ; j < hi && len(cells[j]) > col; j++ {
			w = max(w, displayWidth(cells[j][col]))
		}
		for k := i; k < j; k++ {
			widths[k][col] = w + 2
		}
		layoutColumns(cells, widths, col+1, i, j)
		i = j
	}
}

// displayWidth is the number of terminal columns s takes.
func displayWidth(s string) int {
	n := 0
	joined := false // the previous rune was a zero-width joiner
	for _, r := range s {
		wasJoined := joined
		joined = r == '\u200d'
		switch {
		case wasJoined:
			// A ZWJ sequence (👩‍💻) shows as one glyph: the joined
			// rune adds nothing to the first one's width.
		case r == '\u200d' || r == '\ufe0f' || r == '\ufe0e' || unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf):
		case r < 0x1100:
			n++
		default:
			switch width.LookupRune(r).Kind() {
			case width.EastAsianWide, width.EastAsianFullwidth:
				n += 2
			default:
				n++
			}
		}
	}
	return n
}

// nameText makes a name safe and honest to show: besides what
// [printable] escapes, format and zero-width characters, variation
// selectors and other invisible code points become Go escapes, so a name
// cannot hide characters that make it differ from the one it shows.
func nameText(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case safeRune(r, false) && unicode.IsGraphic(r) && !unicode.In(r, unicode.Cf, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point):
			b.WriteRune(r)
		default:
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		}
		s = s[n:]
	}
	return b.String()
}

// nameCell is a name for a table cell: escaped by [nameText], or "-".
func nameCell(s string) string { return dash(nameText(s)) }

// claimedText shows a name a node claims for itself rather than one the
// roster gives it: quoted, with everything beyond ASCII escaped, so
// "car\u043el" cannot pass for carol.
func claimedText(s string) string { return strconv.QuoteToASCII(s) }
