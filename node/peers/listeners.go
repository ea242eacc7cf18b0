package peers

import (
	"errors"

	"github.com/meshd/meshd/transport"
	"github.com/meshd/meshd/transport/mdns"
)

// SetLinkConfig sets the settings of every link of the node, the ones it
// dials and the ones its listeners accept. Call it before Start.
func (s *Service) SetLinkConfig(c transport.Config) { s.link = c }

// LinkConfig returns the settings of the node's links (SetLinkConfig).
func (s *Service) LinkConfig() transport.Config { return s.link }

// AddListener hands the service a bound listener: Start accepts on it,
// and CloseListeners closes it. Call it before Start.
func (s *Service) AddListener(ln *transport.Listener) { s.lns = append(s.lns, ln) }

// Listeners returns the listeners the service accepts on. The slice is
// not to be modified.
func (s *Service) Listeners() []*transport.Listener { return s.lns }

// SetDiscovery hands the service mDNS discovery: Start takes the members
// it finds, and CloseListeners closes it. Call it before Start.
func (s *Service) SetDiscovery(d mdns.Discovery) { s.disc = d }

// Discovery returns the running mDNS discovery, or nil when there is none.
func (s *Service) Discovery() mdns.Discovery { return s.disc }

// CloseListeners stops discovery and closes every listener; safe on a
// service that never started.
func (s *Service) CloseListeners() error {
	var errs []error
	if s.disc != nil {
		errs = append(errs, s.disc.Close())
	}
	for _, ln := range s.lns {
		errs = append(errs, ln.Close())
	}
	return errors.Join(errs...)
}
