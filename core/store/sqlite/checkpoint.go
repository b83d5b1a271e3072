package sqlite

import (
	"context"
	"database/sql"
	"time"
)

// Checkpoints. A checkpoint copies the pages the WAL holds back into the database file. SQLite
// runs one, by default, inside whichever commit takes the WAL past 1000 pages: the committing
// write waits for it, and with it every write queued behind the one writer. Under a steady load
// of batches that was an eighth of the writer's time. So the store's writer never checkpoints
// (wal_autocheckpoint=0), and a connection of the store's own does instead, beside the writes,
// when the writer has committed since the last, at most every checkpointInterval:
//
//   - first a PASSIVE checkpoint, which neither waits for nor blocks a writer or a reader, and
//     copies what no reader still needs while the writes go on;
//   - then, when the WAL has grown past walRestartPages, a second PASSIVE checkpoint with the
//     writer held (the store's write gate), which copies the little the writes added meanwhile.
//     SQLite starts a WAL over from its beginning only when a write begins with every page of it
//     copied (and no reader still reading from it), which a checkpoint beside the writes never
//     leaves: without this step the WAL grew for as long as the writes went on, by 1.4 GB in 20
//     s of a test's writes. Like SQLite's own checkpoints it waits for no reader, so a backup
//     reading the file for minutes holds up no write; the WAL then starts over after it.
//
// Durability is the same: a commit has reached the disk once the WAL is synced, and the
// checkpointer syncs what it copies (synchronous=FULL) before SQLite reuses the WAL. Closing the
// store runs a last checkpoint as the last connection closes, as SQLite does.

// checkpointInterval is the least time between two checkpoints while writes go on.
const checkpointInterval = 250 * time.Millisecond

// walRestartPages is the WAL's size, in pages, past which the checkpointer starts it over:
// SQLite's own default for a checkpoint.
const walRestartPages = 1000

// checkpointer runs checkpoints on its own connection while writes are committed.
type checkpointer struct {
	db *sql.DB
	// hold takes the store's writer, for the time of a checkpoint that must see no write;
	// release gives it back.
	hold    func(context.Context) error
	release func()
	kick    chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
}

// startCheckpointer starts checkpointing with db, a pool of one connection to the file, holding
// the writer with hold and release for a checkpoint that must see no write. It stops, and closes db, when stop is
// called.
func startCheckpointer(ctx context.Context, db *sql.DB, hold func(context.Context) error, release func()) *checkpointer {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := &checkpointer{db: db, hold: hold, release: release, kick: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
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
		// A failed checkpoint (the file busy in another process's checkpoint, a reader that
		// stays, a disk error) leaves the pages in the WAL, where reads find them; the next
		// kick tries again.
		if pages, err := c.checkpoint(ctx); err == nil && pages > walRestartPages && c.hold(ctx) == nil {
			_, _ = c.checkpoint(ctx)
			c.release()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(checkpointInterval):
		}
	}
}

// checkpoint runs a PASSIVE checkpoint and returns the WAL's size in pages.
func (c *checkpointer) checkpoint(ctx context.Context) (walPages int64, err error) {
	var busy, copied int64
	err = c.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &walPages, &copied)
	return walPages, err
}

// stop ends the checkpointer, waits for a checkpoint under way, and closes its connection.
func (c *checkpointer) stop() error {
	c.cancel()
	<-c.done
	return c.db.Close()
}
