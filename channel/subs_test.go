package channel

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/google/uuid"
)

func TestSubState(t *testing.T) {
	for _, s := range []SubState{Unsubscribed, Subscribed, Muted} {
		b, err := s.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back SubState
		if err := back.UnmarshalText(b); err != nil || back != s {
			t.Fatalf("%v: %v %v", s, back, err)
		}
		if p, err := ParseSubState(s.String()); err != nil || p != s {
			t.Fatalf("ParseSubState(%q) = %v, %v", s, p, err)
		}
	}
	if Subscribed.String() != "subscribed" || Muted.String() != "muted" || Unsubscribed.String() != "unsubscribed" {
		t.Fatal("names")
	}
	for _, bad := range []string{"", "Muted", "mute", "1"} {
		if _, err := ParseSubState(bad); err == nil {
			t.Errorf("ParseSubState(%q) accepted", bad)
		}
	}
	if _, err := SubState(3).MarshalText(); err == nil {
		t.Fatal("invalid state marshalled")
	}
	if SubState(3).String() != "substate(3)" {
		t.Fatal(SubState(3).String())
	}
}

func TestSubscriptions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "subscriptions.json")
	s, err := OpenSubscriptions(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Get(idGeneral) != Unsubscribed || len(s.All()) != 0 {
		t.Fatal("new subscriptions not empty")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("file created before the first change")
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Set(idGeneral, Subscribed))
	must(s.Set(idDeploys, Muted))
	must(s.Set(v7(1, 0), Subscribed))
	must(s.Set(v7(1, 0), Unsubscribed)) // removed from the file
	must(s.Set(v7(2, 0), Unsubscribed)) // no-op

	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "channels": {
    "019b76da-a800-7000-8000-000000000001": "subscribed",
    "019b76da-a800-7000-8000-000000000002": "muted"
  }
}
`
	if string(b) != want {
		t.Fatalf("file:\n%s\nwant:\n%s", b, want)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}

	again, err := OpenSubscriptions(path)
	if err != nil {
		t.Fatal(err)
	}
	wantAll := map[uuid.UUID]SubState{idGeneral: Subscribed, idDeploys: Muted}
	if !reflect.DeepEqual(again.All(), wantAll) {
		t.Fatalf("reopened: %v", again.All())
	}
	// All returns a copy.
	all := again.All()
	all[idGeneral] = Muted
	if again.Get(idGeneral) != Subscribed {
		t.Fatal("All shares its map")
	}

	if err := s.Set(idGeneral, SubState(7)); err == nil {
		t.Fatal("invalid state set")
	}
	if err := s.Set(uuid.Nil, Subscribed); err == nil {
		t.Fatal("nil id set")
	}
}

func TestSubscriptionsErrors(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"garbage":       "{",
		"unknown state": `{"channels": {"019b76da-a800-7000-8000-000000000001": "loud"}}`,
		"unknown field": `{"channels": {}, "extra": 1}`,
		"bad id":        `{"channels": {"general": "muted"}}`,
		"nil id":        `{"channels": {"00000000-0000-0000-0000-000000000000": "muted"}}`,
		"two objects":   `{"channels": {}} {}`,
		"trailing }":    `{"channels": {}} }`,
	} {
		path := filepath.Join(dir, name+".json")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenSubscriptions(path); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// An explicit "unsubscribed" and a null map are accepted.
	path := filepath.Join(dir, "ok.json")
	if err := os.WriteFile(path, []byte(`{"channels": {"019b76da-a800-7000-8000-000000000001": "unsubscribed"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := OpenSubscriptions(path); err != nil || len(s.All()) != 0 {
		t.Fatalf("%v %v", s, err)
	}

	// A failed save leaves the state as it was.
	sub := filepath.Join(dir, "sub")
	s, err := OpenSubscriptions(filepath.Join(sub, "subscriptions.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sub, nil, 0o600); err != nil { // the directory is now a file
		t.Fatal(err)
	}
	if err := s.Set(idGeneral, Muted); err == nil {
		t.Fatal("saved under a file")
	}
	if s.Get(idGeneral) != Unsubscribed {
		t.Fatal("state changed although the save failed")
	}
}

// TestSubscriptionsConcurrent: run with -race. The file ends up holding
// the final state.
func TestSubscriptionsConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "subscriptions.json")
	s, err := OpenSubscriptions(path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			id := v7(int64(g), 0)
			for i := range 10 {
				if err := s.Set(id, SubState(i%3)); err != nil {
					t.Error(err)
				}
				s.Get(id)
				s.All()
			}
			if err := s.Set(id, Muted); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	again, err := OpenSubscriptions(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := again.All(); len(got) != 8 || !reflect.DeepEqual(got, s.All()) {
		t.Fatalf("file holds %v", got)
	}
	var f map[string]any
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
}
