package control

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/meshd/meshd/node/api"
)

// eventBatch bounds the queued items written with one flush.
const eventBatch = 256

// events serves GET /v1/events: a text/event-stream of inbox items as
// they are delivered ("event: item", data one api.Item as JSON), a
// comment line every 15 s to keep idle proxies and clients honest, and
// "event: lagged" when this subscriber fell behind and lost items (read
// the inbox to catch up). When attachments of an item are in place beside
// its mailbox file, "event: attachments" carries an api.AttachmentsReady
// naming each with its local path.
func (s *Server) events(w http.ResponseWriter, req *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeErr(w, http.StatusInternalServerError, fmt.Errorf("streaming unsupported"), "")
		return
	}
	ch, lagged, cancel := s.b.SubscribeEvents()
	defer cancel()
	// A stream is a client waiting on the inbox, unless it says it only
	// rings a doorbell for a host whose model is at work (passive=1).
	if p := req.URL.Query().Get("passive"); p != "1" && p != "true" {
		defer s.b.ClientWaiting()()
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": meshd inbox events\n\n")
	fl.Flush()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-req.Context().Done():
			return
		case <-s.b.Done():
			return
		case <-keep.C:
			fmt.Fprint(w, ": keepalive\n\n")
		case d := <-ch:
			if lagged() {
				fmt.Fprint(w, "event: lagged\ndata: {}\n\n")
			}
			writeItemEvent(w, d)
			// Under load, send what else is queued with the same flush:
			// one write for many events instead of one each.
		queued:
			for range eventBatch {
				select {
				case d := <-ch:
					writeItemEvent(w, d)
				default:
					break queued
				}
			}
		}
		fl.Flush()
	}
}

// writeItemEvent renders one inbox item, or one item's attachments now
// present, and writes it as a server-sent event.
func writeItemEvent(w io.Writer, d api.Delivered) {
	if r, ok := d.(api.ReadyDelivered); ok {
		b, _ := json.Marshal(r.Ready())
		fmt.Fprintf(w, "event: attachments\ndata: %s\n\n", b)
		return
	}
	b, _ := json.Marshal(d.Item())
	fmt.Fprintf(w, "event: item\ndata: %s\n\n", b)
}
