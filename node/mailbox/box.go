package mailbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
)

// Box is one node's mailbox: the mirror, the loop that runs it and the
// outbox, all under one root, opened, run and closed together.
type Box struct {
	Mirror *Mirror
	Loop   *Loop
	Outbox *Outbox
}

// OpenBox opens the mirror and the outbox under root; loop is the mirror
// loop's configuration, whose Root and Mirror OpenBox fills in. On error
// nothing is left open.
func OpenBox(root string, mirror Config, loop LoopConfig, outbox OutboxConfig) (*Box, error) {
	m, err := Open(root, mirror)
	if err != nil {
		return nil, fmt.Errorf("mailbox: %w", err)
	}
	loop.Root, loop.Mirror = root, m
	o, err := OpenOutbox(root, outbox)
	if err != nil {
		_ = m.Close()
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return &Box{Mirror: m, Loop: NewLoop(loop), Outbox: o}, nil
}

// Start runs the mirror loop and the outbox, each as a goroutine started
// by spawn (the owner's WaitGroup.Go), until ctx ends. An outbox that
// stops with an error before then is logged.
func (b *Box) Start(ctx context.Context, spawn func(func()), send func(*OutgoingMessage) (Result, error), log *slog.Logger) {
	spawn(func() { b.Loop.Run(ctx) })
	spawn(func() {
		if err := b.Outbox.Run(ctx, send); err != nil && ctx.Err() == nil {
			log.Error("outbox stopped", "err", err)
		}
	})
}

// Close closes the outbox and the mirror; the goroutines of Start must
// have ended.
func (b *Box) Close() error {
	return errors.Join(b.Outbox.Close(), b.Mirror.Close())
}
