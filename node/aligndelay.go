package node

import (
	"time"

	"github.com/meshd/meshd/internal/clockgrid"
)

// alignedDelay returns how long from now until the next multiple of iv
// on the clock (iv when that is now).
func alignedDelay(now time.Time, iv time.Duration) time.Duration { return clockgrid.Next(now, iv) }
