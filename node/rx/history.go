package rx

import (
	"github.com/meshd/meshd/node/syncer"
)

// historyStage runs the catch-up pages the syncer hands over through the
// receive pipeline, as history, and reports each page handed; a marker
// queued behind its envelopes has the commit stage report it stored.
func (p *Pipeline) historyStage() {
	pages := p.Sync.Batches()
	for {
		var b *syncer.Batch
		select {
		case b = <-pages:
		case <-p.ctx.Done():
			return
		}
		src := Source{Link: b.Src.Link, History: b.Src.History, Page: b}
		fresh := 0
		for _, se := range b.Envelopes {
			if p.Receive(se.Raw, src) {
				fresh++
			}
		}
		b.Handed(fresh)
		select {
		case p.q <- Item{page: b}:
		case <-p.ctx.Done():
			b.Stored()
			return
		}
	}
}

// syncSource is the syncer's form of a source.
func (s Source) syncSource() syncer.Source { return syncer.Source{Link: s.Link, History: s.History} }

// takePages removes the page markers from a commit batch, in place, and
// returns the envelopes and the pages.
func takePages(batch []Item) ([]Item, []*syncer.Batch) {
	var pages []*syncer.Batch
	out := batch[:0]
	for _, it := range batch {
		if it.page != nil {
			pages = append(pages, it.page)
			continue
		}
		out = append(out, it)
	}
	return out, pages
}

// pagesStored reports the pages of a commit batch stored.
func pagesStored(pages []*syncer.Batch) {
	for _, b := range pages {
		b.Stored()
	}
}
