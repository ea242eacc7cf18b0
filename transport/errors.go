package transport

import "errors"

// Errors callers may need to tell apart with errors.Is. Handshake
// failures wrap [ErrHandshake] and, where one applies, a more specific
// error below; link failures are reported by [Link.Err].
var (
	// ErrHandshake wraps every handshake failure, together with its cause.
	ErrHandshake = errors.New("handshake failed")
	// ErrUnexpectedPeer: the responder's identity is not the key the dialer
	// expected.
	ErrUnexpectedPeer = errors.New("unexpected peer identity")
	// ErrIdentityBinding: the peer's StaticSig does not verify against the
	// Noise static key it proved in the handshake.
	ErrIdentityBinding = errors.New("identity binding failed")
	// ErrKnock: the peer knocked (Config.Knock); a knock is refused once
	// the responder's Refused hook has answered it.
	ErrKnock = errors.New("a knock is answered, never linked")
	// ErrWrongOrg: the peer's payload names another org.
	ErrWrongOrg = errors.New("peer belongs to another org")
	// ErrNotAdmitted: [Config.Admit] refused the peer. The hook's own error
	// is wrapped too.
	ErrNotAdmitted = errors.New("peer not admitted")
	// ErrFrameTooLarge: a frame exceeds proto.MaxFrameSize, on send or on
	// reassembly.
	ErrFrameTooLarge = errors.New("frame too large")
	// ErrQueueFull: the link's send queue is full; the frame was dropped.
	ErrQueueFull = errors.New("send queue full")
	// ErrClosed: the link or listener was closed locally.
	ErrClosed = errors.New("closed")
	// ErrTimeout: a handshake step, a write, or the idle timer ran out.
	ErrTimeout = errors.New("timed out")
	// ErrSlowReader: a write to the peer stayed blocked past the write
	// deadline (the idle timeout), so the peer is not reading. It is
	// reported together with [ErrTimeout].
	ErrSlowReader = errors.New("peer is not reading")
	// ErrProtocol: the peer broke the wire format (bad length, header or
	// authentication tag).
	ErrProtocol = errors.New("protocol violation")
)
