package node

import (
	"fmt"
	"slices"
	"strings"

	"github.com/meshd/meshd/proto"
)

// A counter is defined once, next to the code that counts it, with
// [newCounter]: its dotted name (the key of [status.Reporter.Counters] and of
// `meshctl status --verbose`), the Prometheus family it feeds and its
// label values there. Definitions run at package init; each gets a fixed
// atomic in every [Metrics], so counting one is a single atomic add: no
// string is built and no map is looked up. promexport builds its families
// from [RegisteredCounters], and its tests hold the package doc's table
// to the same list.

// Family is a Prometheus counter family that node counters feed.
type Family struct {
	Name   string   // "meshd_envelopes_dropped_total"
	Help   string   // one sentence
	Labels []string // label names; each counter of the family gives a value for each
}

// CounterDef is a registered counter.
type CounterDef struct {
	Name   string   // dotted name, "drop.expired"
	Family *Family  // the family it feeds
	Values []string // its label values, one per Family.Labels
}

// counter is the index of a registered counter in [Metrics.typed].
type counter int

var (
	counterDefs   []CounterDef
	counterByName = map[string]counter{}
)

// newFamily defines a counter family.
func newFamily(name, help string, labels ...string) *Family {
	return &Family{Name: name, Help: help, Labels: labels}
}

// newCounter registers the counter name of family f with the given label
// values. It runs at package init only; a bad definition is a programming
// error and stops the program at start.
func newCounter(name string, f *Family, values ...string) counter {
	if len(values) != len(f.Labels) {
		panic(fmt.Sprintf("counter %s: %d label values for family %s with labels %v", name, len(values), f.Name, f.Labels))
	}
	if f == famEvents && values[0] != name {
		panic("counter " + name + " of " + f.Name + " must be labelled with its name")
	}
	if _, dup := counterByName[name]; dup {
		panic("counter " + name + " defined twice")
	}
	c := counter(len(counterDefs))
	counterDefs = append(counterDefs, CounterDef{Name: name, Family: f, Values: values})
	counterByName[name] = c
	return c
}

// counterVec is the counters of one family indexed by a small enum E: the
// counter of E's value i is prefix+names[i], with names[i] as its last
// label value. An empty name (an enum's "none") has no counter.
type counterVec[E ~uint8] struct {
	c []counter
}

func newCounterVec[E ~uint8](prefix string, f *Family, names []string, values ...string) counterVec[E] {
	v := counterVec[E]{c: make([]counter, len(names))}
	for i, name := range names {
		v.c[i] = -1
		if name != "" {
			v.c[i] = newCounter(prefix+name, f, append(slices.Clip(values), name)...)
		}
	}
	return v
}

// at returns the counter of e.
func (v counterVec[E]) at(e E) counter { return v.c[e] }

// RegisteredCounters returns every defined counter, in definition order.
func RegisteredCounters() []CounterDef { return slices.Clone(counterDefs) }

// famEvents is the family of counters with no dedicated one, labelled by
// their dotted name; promexport also puts there every name it cannot map.
var famEvents = newFamily("meshd_events_total", "Node counters with no dedicated family, by dotted name.", "name")

// newEvent defines a counter of [famEvents].
func newEvent(name string) counter { return newCounter(name, famEvents, name) }

// newEventVec is [newCounterVec] for [famEvents], whose label value is
// the whole dotted name.
func newEventVec[E ~uint8](prefix string, names []string) counterVec[E] {
	v := counterVec[E]{c: make([]counter, len(names))}
	for i, name := range names {
		v.c[i] = -1
		if name != "" {
			v.c[i] = newEvent(prefix + name)
		}
	}
	return v
}

// kindVec is one counter per known envelope kind, "<prefix><kind>", with
// the kind as last label value. Only parsed envelopes are counted, and
// parsing refuses a kind this node does not know, so no other is needed.
type kindVec []counter

func newKindVec(prefix string, f *Family, values ...string) kindVec {
	var v kindVec
	for k := proto.Kind(0); k <= proto.KindHistoryResponse; k++ {
		c := counter(-1)
		if k >= proto.KindMessage {
			c = newCounter(prefix+k.String(), f, append(slices.Clip(values), k.String())...)
		}
		v = append(v, c)
	}
	return v
}

// of returns the counter of kind k, or -1 (counted nowhere) for a kind
// this node does not know.
func (v kindVec) of(k proto.Kind) counter {
	if int(k) < len(v) {
		return v[k]
	}
	return -1
}

// frameVec is one counter per known frame type, "<prefix><frame>", with
// the frame type's name as last label value. A node only sends the frame
// types it knows.
type frameVec []counter

func newFrameVec(prefix string, f *Family, values ...string) frameVec {
	var v frameVec
	for t := range proto.FrameType(16) {
		c := counter(-1)
		if name := t.String(); t > 0 && !strings.HasPrefix(name, "frame(") {
			c = newCounter(prefix+name, f, append(slices.Clip(values), name)...)
		}
		v = append(v, c)
	}
	return v
}

// of returns the counter of frame type t, or -1 (counted nowhere) for a
// type this node does not know.
func (v frameVec) of(t proto.FrameType) counter {
	if int(t) < len(v) {
		return v[t]
	}
	return -1
}
