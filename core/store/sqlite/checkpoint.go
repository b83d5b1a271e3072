package sqlite

import (
	"context"
	"database/sql"
	"time"
)

// checkpointInterval is the least time between two of the store's checkpoints. At the
// embedded store's top write rates the WAL grows by about SQLite's own checkpoint threshold
// (1,000 pages) in that time.
const checkpointInterval = 100 * time.Millisecond

// checkpointer copies the WAL's committed pages back into the database file on a connection of
// its own, after writes, at most once per checkpointInterval. The writer connection has SQLite's
// automatic checkpoint turned off: with it on, the commit that crossed the threshold copied the
// pages itself, a tenth of the writer's time under load, while every other write waited behind
// it. A checkpoint here is PASSIVE: it copies what no reader still needs and waits for nobody,
// as the automatic one did. It changes nothing about durability: a commit is on disk in the WAL
// (synchronous=FULL) before it returns, checkpointed or not.
type checkpointer struct {
	db *sql.DB
	// restart is the WAL length, in frames, from which a checkpoint restarts the WAL.
	restart int
	// gate is the store's writer gate, held while the WAL restarts.
	gate chan struct{}
	kick chan struct{}
	stop context.CancelFunc
	done chan struct{}
}

// startCheckpointer runs a checkpointer on db (one connection) until close, restarting the WAL
// once it reaches restart frames. ctx's values are kept, its end is not: the checkpointer lives
// until close.
func startCheckpointer(ctx context.Context, db *sql.DB, gate chan struct{}, restart int) *checkpointer {
	ctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	c := &checkpointer{db: db, restart: restart, gate: gate, kick: make(chan struct{}, 1), stop: stop, done: make(chan struct{})}
	go c.run(ctx)
	return c
}

func (c *checkpointer) run(ctx context.Context) {
	defer close(c.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		}
		c.checkpoint(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(checkpointInterval):
		}
	}
}

// restartFrames is the WAL's length, in frames (pages), from which a checkpoint also restarts
// it. A WAL starts over from its beginning only when a write begins with every frame copied;
// under steady writes a checkpoint never finishes before the next commit, so without a restart
// the WAL, and the index every connection maps, would grow for as long as the writes go on.
const restartFrames = 4000

// checkpoint copies what it can without waiting for anyone; when the WAL has grown past
// c.restart, it then takes the writer gate, in turn with the writes waiting for it, and finishes
// the copy and restarts the WAL: the store's writes wait for as long as that takes (the pages
// left to copy are those of the last moments, and the readers of older pages, point lookups,
// finish within the busy timeout). Taking the gate matters: SQLite's restart waits for the write
// lock by polling, and a writer that takes it again after every commit would starve it. A
// checkpoint that fails (a lock held by another process, say) leaves the pages in the WAL, where
// reads find them; the next one copies them.
func (c *checkpointer) checkpoint(ctx context.Context) {
	var busy, frames, copied int
	if err := c.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &copied); err != nil {
		return
	}
	if frames < c.restart {
		return
	}
	select {
	case c.gate <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-c.gate }()
	_, _ = c.db.ExecContext(ctx, "PRAGMA wal_checkpoint(RESTART)")
}

// committed tells the checkpointer that a write was committed. It never blocks.
func (c *checkpointer) committed() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// close stops the checkpointer, waits for a checkpoint in progress, and closes its connection.
func (c *checkpointer) close() error {
	c.stop()
	<-c.done
	return c.db.Close()
}
