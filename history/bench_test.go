package history

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/meshd/meshd/proto"
)

// benchEnvelopes signs n channel messages of about size bytes, round-robin
// over a few senders, before the timer starts.
func benchEnvelopes(b *testing.B, ch uuid.UUID, n, size int) []*proto.SignedEnvelope {
	b.Helper()
	senders := make([]*sender, 8)
	for i := range senders {
		senders[i] = newSender(b, fmt.Sprint("bench", i))
	}
	out := make([]*proto.SignedEnvelope, n)
	base := time.Now().UnixMilli()
	for i := range out {
		out[i] = senders[i%len(senders)].msg(b, ch, base+int64(i), body(size))
	}
	return out
}

// BenchmarkPut measures durable Puts of 1 KiB envelopes: one caller at a
// time (each Put waits for its own commit), and many callers at once
// (group commit folds them into shared transactions).
func BenchmarkPut(b *testing.B) {
	b.Run("sequential", func(b *testing.B) {
		s, _ := openTest(b, Config{})
		envs := benchEnvelopes(b, uuid.New(), b.N, 1024)
		b.ResetTimer()
		start := time.Now()
		for i := range b.N {
			if _, err := s.Put(envs[i], false); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "envelopes/s")
		reportBatch(b, s)
	})
	// parallel uses the default window; parallel-nowindow commits what
	// queued up during the previous commit, for comparison.
	for _, tc := range []struct {
		name   string
		window time.Duration
	}{{"parallel", 0}, {"parallel-nowindow", -1}} {
		b.Run(tc.name, func(b *testing.B) {
			s, _ := openTest(b, Config{CommitWindow: tc.window})
			envs := benchEnvelopes(b, uuid.New(), b.N, 1024)
			var next atomic.Int64
			b.SetParallelism(64)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := next.Add(1) - 1
					if _, err := s.Put(envs[i], false); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "envelopes/s")
			reportBatch(b, s)
		})
	}
}

func reportBatch(b *testing.B, s *Store) {
	b.StopTimer()
	st := mustStats(b, s)
	b.ReportMetric(st.EnvelopesPerCommit, "envelopes/commit")
	// The pages in use (bbolt's high-water mark), per envelope.
	var size int64
	if err := s.db.View(func(tx *bolt.Tx) error { size = tx.Size(); return nil }); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(size)/float64(b.N), "db-bytes/envelope")
}

// BenchmarkSeen measures the dedupe check for a recent duplicate (served
// from memory) and for a new envelope (one B-tree lookup).
func BenchmarkSeen(b *testing.B) {
	s, _ := openTest(b, Config{})
	envs := benchEnvelopes(b, uuid.New(), 1000, 100)
	mustPut(b, s, envs...)
	b.Run("hit", func(b *testing.B) {
		for i := range b.N {
			if ok, err := s.Seen(envs[i%len(envs)].From, envs[i%len(envs)].ID); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("miss", func(b *testing.B) {
		from := envs[0].From
		for range b.N {
			if ok, err := s.Seen(from, proto.NewID()); ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
}

// BenchmarkHistoryPage serves pages of 100 envelopes of 1 KiB from a
// channel of 10,000 (the default retention), without marks and with a
// mark for each of the eight senders.
func BenchmarkHistoryPage(b *testing.B) {
	s, _ := openTest(b, Config{})
	ch := uuid.New()
	envs := benchEnvelopes(b, ch, 10000, 1024)
	for i := 0; i < len(envs); i += 1000 {
		mustPut(b, s, envs[i:i+1000]...)
	}
	since := envs[5000].TS
	var marks []proto.SeqMark
	for _, se := range envs[5000:5008] {
		marks = append(marks, proto.SeqMark{Sender: se.From, Epoch: se.Epoch, LastSeq: se.Seq - 1})
	}
	slicesSortMarks(marks)
	for _, tc := range []struct {
		name  string
		marks []proto.SeqMark
	}{{"since", nil}, {"marks", marks}} {
		b.Run(tc.name, func(b *testing.B) {
			req := &proto.HistoryRequest{ChannelID: ch, SinceTS: since, SinceSeqBySender: tc.marks,
				MaxMessages: 100, MaxBytes: proto.MaxHistoryBytes}
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				msgs, more, err := s.History(req)
				if err != nil || len(msgs) != 100 || !more {
					b.Fatalf("page: %d messages, more=%v, err=%v", len(msgs), more, err)
				}
			}
			b.ReportMetric(float64(b.N*100)/time.Since(start).Seconds(), "envelopes/s")
		})
	}
}
