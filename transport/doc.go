// Package transport carries meshd links: Noise-encrypted, mutually
// authenticated byte-frame streams over TCP or Unix stream sockets.
//
// [Listen] and [Dial] (or [Server] and [Client] over any net.Conn) run the
// handshake and return a [Link]. A link moves application frames (opaque
// byte slices of up to [proto.MaxFrameSize] bytes) in order, keeps itself
// alive, and tears itself down on any protocol violation. It knows nothing
// about what frames mean, rosters or routing: the caller decides who may
// connect through [Config.Admit].
//
// Listen and Dial open the host's TCP and Unix sockets, or, when
// [Config.Net] is set, the listeners and connections of another
// [Network]: transport/memnet is an in-memory one, on which tests build
// whole nodes inside a testing/synctest bubble.
//
// # Wire format
//
// Record layer. Every Noise message on the stream, handshake or transport,
// is preceded by its length as a 2-byte big-endian unsigned integer:
//
//	record = length:uint16be || noise_message[length]
//
// A record therefore carries at most 65535 bytes of Noise message, the
// Noise maximum. Receivers read the 2 length bytes, check the length
// against the limit for the current state (below) and only then read the
// body, so a peer cannot make a receiver allocate or wait for more than the
// limit.
//
// Handshake. The protocol is Noise_XX_25519_ChaChaPoly_SHA256 with
// prologue [proto.Prologue](org) = "meshd/<protocol version>\x00<org id>",
// so nodes of another org or protocol version fail at message 2 with an
// authentication error. Each node uses an X25519 static key of its own,
// separate from its Ed25519 identity.
//
//	message 1, initiator -> responder:  e                  (payload empty)
//	message 2, responder -> initiator:  e, ee, s, es       + responder payload
//	message 3, initiator -> responder:  s, se              + initiator payload
//
// Message 1 is exactly 32 bytes. Messages 2 and 3 are at most
// 96 + [proto.MaxHandshakePayload] bytes; a longer length prefix fails the
// handshake before the body is read. Each payload is a canonical CBOR
// [proto.HandshakePayload] (decoded with [proto.ParseHandshakePayload])
// whose StaticSig is the sender's Ed25519 signature over
// [proto.DomainNoiseStatic] || the sender's Noise static public key
// (see [proto.HandshakePayload.BindStatic]).
//
// The initiator, after reading message 2 and before writing message 3,
// checks in this order: the payload decodes; its Org equals ours
// ([ErrWrongOrg]); StaticSig verifies against the Noise static key the
// responder proved in message 2 ([ErrIdentityBinding]); if the dialer
// expected a key, the responder's identity equals it in constant time
// ([ErrUnexpectedPeer]); [Config.Admit] accepts the payload
// ([ErrNotAdmitted]). Any failure closes the connection without sending
// message 3. The responder runs the same checks, except the expected key,
// on the payload of message 3. Every handshake read and write has a
// deadline of [Config.HandshakeTimeout] from the start of that step,
// shortened by the context's deadline.
//
// Knocks (PROTOCOL.md §14.11). With [Config.Knock] the initiator uses
// [proto.KnockPrologue] (an empty org id) and sends [proto.KnockMarker] as
// message 1's cleartext payload, so message 1 is 43 bytes; a listener
// with [Config.AnswerKnocks] tells it from an ordinary message 1 by its
// length and answers under the same prologue, and one without refuses it.
// Neither side checks the other's org; both payloads have Knock set. The
// responder never admits a knock: after Admit it hands the session to
// [Config.Refused] ([ErrKnock]) and closes it.
//
// Transport messages. After the handshake, each Noise transport message is
// at least 17 bytes (a 16-byte tag and a 1-byte header) and its plaintext
// at most 65535 - 16 = 65519 bytes. The first plaintext byte is a header:
//
//	0  chunk: the rest is part of a frame and more chunks follow
//	1  final chunk: the rest ends the current frame (possibly empty)
//	2  ping: no body; the receiver answers with a pong
//	3  pong: no body
//
// Any other header, a body on a ping or pong, a message that fails
// authentication, or a message shorter than 17 bytes closes the link with
// [ErrProtocol]. A frame is the concatenation of the bodies of zero or more
// chunk messages and one final chunk message; senders put at most 65518
// frame bytes in each message. A zero-length frame is a single final chunk
// with no body. Ping and pong messages may appear between the chunks of a
// frame. A receiver whose reassembled frame would exceed
// [proto.MaxFrameSize] closes the link with [ErrFrameTooLarge] before
// buffering the excess.
//
// testdata/handshake-vector.txt holds a complete transcript (keys,
// payloads, the three handshake records and one transport record each way)
// for checking another implementation.
//
// Keepalive. A side that has received nothing for
// [Config.KeepaliveInterval] (or sent nothing for twice that) sends a
// ping, which the peer answers with a pong; a side that has received
// nothing (of any message type) for [Config.IdleTimeout] (plus at most an
// eighth) closes the link with [ErrTimeout]. A dead TCP peer is found
// sooner by the kernel: link sockets carry TCP keepalive and, on Linux,
// TCP_USER_TIMEOUT (see tcpalive.go). A Noise nonce
// reaching its maximum closes the link (noise.ErrMaxNonce); there is no
// rekeying, reconnecting is cheap.
//
// Slow and flooding peers. A link's send queue is bounded in frames
// ([Config.SendQueue]) and in bytes ([Config.SendQueueBytes]); [Link.Send]
// refuses past either, [Link.SendWait] and [Link.WaitRoom] wait for room.
// A write that stays blocked for [Config.IdleTimeout] (the peer does not
// read) closes the link with [ErrTimeout] and [ErrSlowReader]. The reader
// takes at most [Config.RecvRate] bytes a second from the socket: past it
// it stops reading until its token bucket refills, so TCP flow control
// slows the sender and nothing is dropped. Blob-chunk frames within the
// receive credit the node granted ([Link.GrantRecv], when it asks the
// peer for chunks) are not paced; the credit is at most [MaxRecvCredit].
package transport
