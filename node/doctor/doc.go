// Package doctor is what `meshctl doctor` reports ([Diagnosis.Doctor]):
// checks of this node's membership, the orgs mDNS sees, discovery, seeds,
// links, clocks, disk and mailbox, each with its status and the fix. It
// also holds what the node noticed for those checks as it ran: why mDNS
// did not start ([Diagnosis.MDNSFailed]), the nodes of other orgs mDNS
// reported ([Diagnosis.SawForeignOrg]) and the clock difference fresh
// envelopes show ([Diagnosis.ObserveClock]), which the status page reads
// too ([Diagnosis.MaxSkew]).
//
// The doctor sees the node through [Host]; it imports proto, roster,
// transport, node/api, node/peers and node/join, never node.
package doctor
