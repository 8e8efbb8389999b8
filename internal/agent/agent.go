// Package agent wires heartlet's components together and runs them in order.
// It holds no domain logic.
package agent

import (
	"context"
	"errors"

	"github.com/heartlet/heartlet/internal/config"
)

// Agent is one running node agent.
type Agent struct {
	opts *config.Options
}

// New checks opts and builds the components without side effects.
func New(opts *config.Options) (*Agent, error) {
	return &Agent{opts: opts}, nil
}

// Run starts every component and blocks until ctx is done or one fails.
func (a *Agent) Run(ctx context.Context) error {
	return errors.New("agent: not wired yet")
}
