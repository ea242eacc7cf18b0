package node

import "github.com/meshd/meshd/node/rx"

// The drops of the receive pipeline (node/rx), one counter per reason.
var (
	famDropped = newFamily("meshd_envelopes_dropped_total", "Envelopes dropped by the receive pipeline, by reason.", "reason")
	// cDrop counts the drops, one counter per reason.
	cDrop = newCounterVec[rx.Drop]("drop.", famDropped, rx.DropNames[:])
)
