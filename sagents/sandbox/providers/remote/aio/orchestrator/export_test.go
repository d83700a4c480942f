package orchestrator

import (
	"context"
	"time"
)

var timeNow = time.Now

// Test hooks.

func ThreadLocks(p *Provider) int { return p.threadLocks() }

type Entry = entry

func IdleEntries(p *Provider) []*Entry { return p.idleEntries(timeNow()) }

func ReapEntries(p *Provider, es []*Entry) {
	for _, e := range es {
		_ = p.reapEntry(context.Background(), e)
	}
}
