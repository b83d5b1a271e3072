package sqlite

import (
	"context"
	"database/sql"
	"time"
)

// Checkpoints. A checkpoint copies the pages the WAL holds back into the database file. SQLite
// runs one inside whichever commit takes the WAL past 1000 pages: the committing write waits for
// it, and with it every write queued behind the one writer. Under a steady load of batches that
// was an eighth of the writer's time. So a connection of the store's own checkpoints beside the
// writes, on the core the writer leaves idle: a PASSIVE checkpoint, which neither waits for nor
// blocks a writer or a reader, after commits, at most every checkpointInterval, so that part of
// what the writer's commit at 1000 pages would copy is copied already. Under a steady load of
// batches the writer's own checkpoints still do much of the copying (docs/decisions.md, "The
// embedded store checkpoints beside its writes, at most every 10 ms").
//
// The writer keeps its own checkpoint because it alone starts the WAL over: SQLite does that
// when a write begins with every page of the WAL copied, which a checkpoint beside the writes
// never leaves. With the writer's checkpoint turned off, the WAL grew for as long as writes
// went on (1.4 GB in 20 s of a test's writes); with both, it stays at SQLite's usual size.
//
// Durability is the same: a commit has reached the disk once the WAL is synced, and the
// checkpointer syncs what it copies (synchronous=FULL) before SQLite reuses the WAL.

// checkpointInterval is the pause after each checkpoint before the checkpointer takes the next
// commit's kick: at most one checkpoint per interval plus the checkpoint's own time, kicks that
// arrive meanwhile counting as one. Under a steady load of batches the one writer is what the
// service waits on, with part of a core idle beside it; 10 ms stored more than a longer pause, and
// no pause at all no more than 10 ms (docs/decisions.md, "The embedded store checkpoints beside
// its writes, at most every 10 ms").
const checkpointInterval = 10 * time.Millisecond

// checkpointer runs checkpoints on its own connection while writes are committed.
type checkpointer struct {
	db     *sql.DB
	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

// startCheckpointer starts checkpointing with db, a pool of one connection to the file. It stops,
// and closes db, when stop is called.
func startCheckpointer(ctx context.Context, db *sql.DB) *checkpointer {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := &checkpointer{db: db, kick: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	go c.run(ctx)
	return c
}

// committed tells the checkpointer that the writer committed. It never waits.
func (c *checkpointer) committed() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// run checkpoints after each kick, at most every checkpointInterval, until ctx ends.
func (c *checkpointer) run(ctx context.Context) {
	defer close(c.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		}
		// A failed checkpoint (the file busy in another process's checkpoint, a disk error)
		// leaves the pages in the WAL, where reads find them, and the writer's own checkpoint
		// copies them; the next kick tries again.
		_ = c.checkpoint(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(checkpointInterval):
		}
	}
}

// checkpoint runs a PASSIVE checkpoint.
func (c *checkpointer) checkpoint(ctx context.Context) error {
	_, err := c.db.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)")
	return err
}

// stop ends the checkpointer, waits for a checkpoint under way, and closes its connection.
func (c *checkpointer) stop() error {
	c.cancel()
	<-c.done
	return c.db.Close()
}
