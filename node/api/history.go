package api

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// History endpoints:
//
//	GET /v1/history?channel=NAME&since=D&limit=N
//	                     the channel's messages in this node's store, oldest
//	                     first: the newest N (default 100, at most 10,000)
//	                     sent at or after D (a duration back from now, such
//	                     as 90m or 3d, or an RFC 3339 time)
//	GET /v1/sequence     this node's sender epoch and the last sequence
//	                     number it used per destination

// History limits of GET /v1/history.
const (
	DefaultHistoryLimit = 100
	MaxHistoryLimit     = 10_000
)

// HistoryQuery selects stored messages for GET /v1/history.
type HistoryQuery struct {
	Channel string // name, with or without '#', or id
	Since   string // see [ParseSince]; empty: no bound
	Limit   int    // 0: DefaultHistoryLimit
}

// HistoryMessage is one stored channel message.
type HistoryMessage struct {
	ID          string    `json:"id"`
	From        Party     `json:"from"`
	Channel     string    `json:"channel"`
	Sent        time.Time `json:"sent"`
	Received    time.Time `json:"received"` // when this node stored it
	Epoch       string    `json:"epoch"`
	Seq         uint64    `json:"seq"`
	FromHistory bool      `json:"from_history,omitempty"` // arrived through history sync
	Size        int       `json:"size"`                   // bytes of the signed wire form
	Body        string    `json:"body"`
	InReplyTo   string    `json:"in_reply_to,omitempty"`
}

// History is the answer to GET /v1/history.
type History struct {
	Channel   string           `json:"channel"` // name, without '#'
	ChannelID string           `json:"channel_id"`
	Stored    int              `json:"stored"` // messages of the channel in the store
	Messages  []HistoryMessage `json:"messages"`
}

// SequenceEntry is the last sequence number used towards one destination.
type SequenceEntry struct {
	To   string `json:"to"` // "#channel", "@peer" or "org:ID"
	Last uint64 `json:"last"`
}

// Sequence is the answer to GET /v1/sequence.
type Sequence struct {
	Epoch string `json:"epoch"`
	// NewEpoch is set when meshd found no readable send counters when it
	// opened its store (a new or lost store) and started this epoch.
	NewEpoch bool            `json:"new_epoch"`
	Last     []SequenceEntry `json:"last"`
}

// ParseSince reads a lower time bound: a duration back from now ("90m",
// "72h", or whole days such as "3d") or an RFC 3339 time. Empty gives the
// zero time (no bound).
func ParseSince(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseUint(days, 10, 16)
		if err != nil {
			return time.Time{}, fmt.Errorf("since %q: want a duration such as 90m, 72h or 3d, or an RFC 3339 time", s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil || d < 0 {
			return time.Time{}, fmt.Errorf("since %q: want a duration such as 90m, 72h or 3d, or an RFC 3339 time", s)
		}
	}
	return now.Add(-d), nil
}

// History calls GET /v1/history.
func (c *Client) History(ctx context.Context, q HistoryQuery) (*History, error) {
	v := url.Values{}
	v.Set("channel", q.Channel)
	if q.Since != "" {
		v.Set("since", q.Since)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out History
	return &out, c.Get(ctx, "/v1/history?"+v.Encode(), &out)
}

// Sequence calls GET /v1/sequence.
func (c *Client) Sequence(ctx context.Context) (*Sequence, error) {
	var out Sequence
	return &out, c.Get(ctx, "/v1/sequence", &out)
}
