package transport

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/meshd/meshd/proto"
)

// Record-layer and transport-message limits (see the package doc).
const (
	// maxRecord is the largest Noise message a record may carry.
	maxRecord = 65535
	// tagSize is the ChaChaPoly authentication tag.
	tagSize = 16
	// maxPlaintext is the largest transport plaintext: header + chunk.
	maxPlaintext = maxRecord - tagSize
	// maxChunk is the most frame bytes one transport message carries.
	maxChunk = maxPlaintext - 1
	// minTransport is the shortest valid transport message: tag + header.
	minTransport = tagSize + 1

	// dhLen is the size of an X25519 public key.
	dhLen = 32
	// msg1Len is the exact size of handshake message 1 (e, empty payload).
	msg1Len = dhLen
	// knockMsg1Len is the size of a knock's message 1: e and the marker.
	knockMsg1Len = dhLen + len("meshd-knock")
	// maxHandshakeMsg bounds handshake messages 2 and 3:
	// e (32) + encrypted s (48) + payload tag (16) + payload.
	maxHandshakeMsg = dhLen + dhLen + tagSize + tagSize + proto.MaxHandshakePayload
)

// Transport plaintext headers. ONLY APPEND TO THIS LIST.
const (
	hdrChunk byte = 0 // part of a frame, more follows
	hdrFinal byte = 1 // last part of a frame
	hdrPing  byte = 2 // keepalive request, no body
	hdrPong  byte = 3 // keepalive answer, no body
)

// readRecord reads one length-prefixed record into buf and returns it. It
// checks the length against len(buf) before reading the body, so buf's
// size is the cap: nothing is allocated here and a peer claiming more than
// the cap is refused without waiting for the rest.
func readRecord(r io.Reader, buf []byte) ([]byte, error) {
	if len(buf) < 2 {
		panic("transport: record buffer shorter than a length prefix")
	}
	// The prefix goes into buf too: a local array would escape to the
	// heap through io.Reader, one allocation per record.
	if _, err := io.ReadFull(r, buf[:2]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(buf))
	if n > len(buf) {
		return nil, fmt.Errorf("%w: record of %d bytes exceeds %d", ErrProtocol, n, len(buf))
	}
	if _, err := io.ReadFull(r, buf[:n]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf[:n], nil
}

// appendRecord appends the record for msg to dst.
func appendRecord(dst, msg []byte) ([]byte, error) {
	if len(msg) > maxRecord {
		return dst, fmt.Errorf("noise message of %d bytes exceeds %d", len(msg), maxRecord)
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(msg)))
	return append(dst, msg...), nil
}

// assembler reassembles frames from decrypted transport plaintexts. It
// never holds more than max bytes.
type assembler struct {
	max     int
	buf     []byte // frame so far; nil between frames
	partial bool   // a chunk (header 0) has been seen since the last final
}

// message is one decoded transport plaintext.
type message struct {
	kind  byte   // hdrFinal (frame complete), hdrPing or hdrPong; 0 if nothing to do
	frame []byte // the completed frame when kind == hdrFinal
}

// add processes one transport plaintext. The returned frame is newly
// allocated and owned by the caller.
func (a *assembler) add(pt []byte) (message, error) {
	if len(pt) == 0 {
		return message{}, fmt.Errorf("%w: empty transport message", ErrProtocol)
	}
	body := pt[1:]
	switch pt[0] {
	case hdrChunk, hdrFinal:
		if len(a.buf)+len(body) > a.max {
			return message{}, fmt.Errorf("%w: frame exceeds %d bytes", ErrFrameTooLarge, a.max)
		}
		if pt[0] == hdrFinal && !a.partial {
			// The common case: a frame in one message, allocated once.
			return message{kind: hdrFinal, frame: append(make([]byte, 0, len(body)), body...)}, nil
		}
		if need := len(a.buf) + len(body); need > cap(a.buf) {
			// Grow by doubling but never past max, so a peer streaming
			// chunks cannot make us allocate beyond the cap. A blob-chunk
			// frame gets room for a whole chunk at once: it is nearly
			// always that size, and doubling would copy it three times
			// and leave it in twice the memory.
			c := min(max(2*cap(a.buf), need), a.max)
			var nb []byte
			if len(a.buf) == 0 && len(body) > 0 && body[0] == creditedFrame {
				c = min(max(c, chunkFrameCap), a.max)
				if c == chunkFrameCap {
					nb = getChunkFrame() // handed back by RecycleChunkFrame
				}
			}
			if nb == nil {
				nb = make([]byte, len(a.buf), c)
				copy(nb, a.buf)
			}
			a.buf = nb
		}
		a.buf = append(a.buf, body...)
		a.partial = true
		if pt[0] == hdrChunk {
			return message{}, nil
		}
		f := a.buf
		a.buf, a.partial = nil, false
		return message{kind: hdrFinal, frame: f}, nil
	case hdrPing, hdrPong:
		if len(body) != 0 {
			return message{}, fmt.Errorf("%w: %d-byte body on a keepalive message", ErrProtocol, len(body))
		}
		return message{kind: pt[0]}, nil
	}
	return message{}, fmt.Errorf("%w: unknown message header %d", ErrProtocol, pt[0])
}
