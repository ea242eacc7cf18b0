package transport

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/flynn/noise"

	"github.com/meshd/meshd/proto"
)

// BenchmarkHandshake runs the full XX handshake, both sides, over
// net.Pipe: key generation, three messages, payload encode and parse,
// and the two identity-binding verifications. Each side reuses its static
// key, as a node does.
func BenchmarkHandshake(b *testing.B) {
	ca, cb := testConfig(b, testOrg), testConfig(b, testOrg)
	ca.NoiseKey, _ = NewStaticKey()
	cb.NoiseKey, _ = NewStaticKey()
	ea, _ := newEndpoint(ca)
	eb, _ := newEndpoint(cb)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c1, c2 := net.Pipe()
		errc := make(chan error, 1)
		go func() {
			l, err := eb.server(ctx, c2)
			if err == nil {
				l.Close()
			}
			errc <- err
		}()
		l, err := ea.client(ctx, c1, nil)
		if err != nil {
			b.Fatal(err)
		}
		l.Close()
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
	}
}

// benchPair returns a started pair of links over network.
func benchPair(b *testing.B, network string) (out, in *Link) {
	a, c := testConfig(b, testOrg), testConfig(b, testOrg)
	a.SendQueue, c.SendQueue = 4096, 4096
	// The receive limiter runs but never binds: these measure the link,
	// not the default policy of 32 MiB/s a peer.
	a.RecvRate, c.RecvRate = 1<<40, 1<<40
	addr := Addr{Network: "tcp", Address: "127.0.0.1:0"}
	if network == "unix" {
		addr = Addr{Network: "unix", Address: filepath.Join(testDir(b), "b.sock")}
	}
	ln, err := Listen(context.Background(), addr, c)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	out, in = pair(b, ln, a, nil)
	return out, in
}

// BenchmarkLinkThroughput streams 1 KiB frames one way. The sender keeps
// at most window frames unacknowledged by the receiver's handler, so the
// send queue never fills and nobody spins.
func BenchmarkLinkThroughput(b *testing.B) {
	const ack, window = 256, 2048
	for _, network := range []string{"tcp", "unix"} {
		b.Run(network, func(b *testing.B) {
			credits := make(chan struct{}, b.N/ack+1)
			n := 0
			out, in := benchPair(b, network)
			in.Start(func([]byte) {
				if n++; n%ack == 0 || n == b.N {
					credits <- struct{}{}
				}
			})
			out.Start(nil)
			frame := make([]byte, 1024)
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			acked := 0
			for i := range b.N {
				for i-acked >= window {
					<-credits
					acked += ack
				}
				if err := out.Send(frame); err != nil {
					b.Fatal(err)
				}
			}
			for acked < b.N {
				<-credits
				acked += ack
			}
			el := time.Since(start)
			b.ReportMetric(float64(b.N)/el.Seconds(), "frames/s")
		})
	}
}

// BenchmarkLinkRoundTrip measures 1 KiB request and echo over a link.
func BenchmarkLinkRoundTrip(b *testing.B) {
	for _, network := range []string{"tcp", "unix"} {
		b.Run(network, func(b *testing.B) {
			back := make(chan []byte, 1)
			out, in := benchPair(b, network)
			in.Start(func(f []byte) { in.Send(f) })
			out.Start(func(f []byte) { back <- f })
			frame := make([]byte, 1024)
			b.ReportAllocs()
			for b.Loop() {
				if err := out.Send(frame); err != nil {
					b.Fatal(err)
				}
				<-back
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/rtt")
		})
	}
}

// BenchmarkRawRoundTrip is the baseline: 1 KiB echo over a plain socket,
// no Noise, no link goroutines.
func BenchmarkRawRoundTrip(b *testing.B) {
	for _, network := range []string{"tcp", "unix"} {
		b.Run(network, func(b *testing.B) {
			addr := "127.0.0.1:0"
			if network == "unix" {
				addr = filepath.Join(testDir(b), "r.sock")
			}
			ln, err := net.Listen(network, addr)
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			done := make(chan struct{})
			go func() {
				defer close(done)
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				buf := make([]byte, 1024)
				for {
					if _, err := io.ReadFull(c, buf); err != nil {
						return
					}
					if _, err := c.Write(buf); err != nil {
						return
					}
				}
			}()
			c, err := net.Dial(network, ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 1024)
			for b.Loop() {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/rtt")
			c.Close()
			<-done
		})
	}
}

// BenchmarkNoiseXXRaw is the baseline for BenchmarkHandshake: the bare
// flynn/noise XX handshake in memory, empty payloads, no I/O, no identity
// binding.
func BenchmarkNoiseXXRaw(b *testing.B) {
	ka, _ := cipherSuite.GenerateKeypair(nil)
	kb, _ := cipherSuite.GenerateKeypair(nil)
	pro := proto.Prologue(testOrg)
	for b.Loop() {
		i, _ := noise.NewHandshakeState(noise.Config{CipherSuite: cipherSuite, Pattern: noise.HandshakeXX, Initiator: true, Prologue: pro, StaticKeypair: ka})
		r, _ := noise.NewHandshakeState(noise.Config{CipherSuite: cipherSuite, Pattern: noise.HandshakeXX, Prologue: pro, StaticKeypair: kb})
		m1, _, _, _ := i.WriteMessage(nil, nil)
		if _, _, _, err := r.ReadMessage(nil, m1); err != nil {
			b.Fatal(err)
		}
		m2, _, _, _ := r.WriteMessage(nil, nil)
		if _, _, _, err := i.ReadMessage(nil, m2); err != nil {
			b.Fatal(err)
		}
		m3, _, _, _ := i.WriteMessage(nil, nil)
		if _, _, _, err := r.ReadMessage(nil, m3); err != nil {
			b.Fatal(err)
		}
	}
}
