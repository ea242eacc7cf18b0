package promexport

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshd/meshd/node"
)

// The families and rows of the counters the node defines, built from
// [node.RegisteredCounters]: each names its family, help, labels and
// label values once, next to the code that counts it.
var nodeFamilies, registeredRules = fromRegistry(node.RegisteredCounters())

func fromRegistry(defs []node.CounterDef) (map[string]*family, []rule) {
	fams := map[string]*family{}
	var rs []rule
	for _, d := range defs {
		f := fams[d.Family.Name]
		if f == nil {
			f = newFamily(prometheus.CounterValue, d.Family.Name, d.Family.Help, d.Family.Labels...)
			fams[d.Family.Name] = f
		}
		rs = append(rs, rule{name: d.Name, fam: f, values: d.Values})
	}
	return fams, rs
}

// nodeFamily returns the family the node defines under name, for a
// prefix rule that catches names of it built at run time.
func nodeFamily(name string) *family {
	if f := nodeFamilies[name]; f != nil {
		return f
	}
	panic(fmt.Sprintf("promexport: the node defines no counter family %s", name))
}

// famEvents takes every dotted name no rule maps, so none is hidden.
var famEvents = nodeFamily("meshd_events_total")

// allRules returns the node's defined counters then the rules.
func allRules() []rule { return append(append([]rule(nil), registeredRules...), rules...) }
