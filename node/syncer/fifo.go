package syncer

import (
	"github.com/google/uuid"

	"github.com/meshd/meshd/proto"
)

// ref names an envelope: its sender and id.
type ref struct {
	from proto.PubKey
	id   uuid.UUID
}

func refOf(se *proto.SignedEnvelope) ref { return ref{se.From, se.ID} }
