package rl

import (
	"context"
	"fmt"
)

// sync calls the Sync hook, if any.
func (c *Config) sync(ctx context.Context, version int64) error {
	if c.Sync == nil {
		return nil
	}
	if err := c.Sync(ctx, version); err != nil {
		return fmt.Errorf("rl: syncing version %d to the engines: %w", version, err)
	}
	return nil
}
