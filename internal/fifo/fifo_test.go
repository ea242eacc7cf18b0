package fifo

import "testing"

func TestMapEvictsOldest(t *testing.T) {
	f := New[int, string](3)
	for i := range 3 {
		f.Put(i, "v")
	}
	f.Put(1, "updated") // an update keeps 1's place and evicts nothing
	if f.Len() != 3 {
		t.Fatalf("len %d after an update, want 3", f.Len())
	}
	for i := 3; i < 6; i++ {
		f.Put(i, "v")
		if _, ok := f.Get(i - 3); ok {
			t.Fatalf("key %d held after %d newer keys", i-3, 3)
		}
		if f.Len() != 3 {
			t.Fatalf("len %d, want 3", f.Len())
		}
	}
	for i := 3; i < 6; i++ {
		if _, ok := f.Get(i); !ok {
			t.Fatalf("key %d forgotten", i)
		}
	}
	if v, _ := f.Get(4); v != "v" {
		t.Fatalf("get(4) = %q", v)
	}
}
