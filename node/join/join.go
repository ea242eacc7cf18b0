package join

// Join is how a node takes in those the roster does not hold yet: the
// invites it made ([Invites]), and the knocks, adoption and pending list
// ([Knocks]). The two keep apart state (the invites file; the knock
// book) under locks of their own; Join holds them as one value, made
// together over one Host.
type Join struct {
	*Invites
	*Knocks
}

// New returns the invites and the knock book of the node h, kept in the
// home of cfg.
func New(h Host, cfg Config) *Join {
	return &Join{Invites: NewInvites(h, cfg), Knocks: NewKnocks(h, cfg)}
}
