package main

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// dbSample is a reading of PostgreSQL's cumulative statistics for the whole server (WAL,
// checkpoints) and the bench database (commits). PostgreSQL flushes them about once a second,
// so a phase's delta is exact to within a second of its work.
type dbSample struct {
	ok          bool
	walFPI      int64 // full-page images among them: a page's first change after a checkpoint
	walBytes    int64
	walSyncs    int64 // WAL flushes to disk (fsync or equivalent)
	commits     int64 // transactions committed in the bench database
	blksRead    int64 // pages the bench database read from outside PostgreSQL's shared buffers
	checkpoints int64 // checkpoints started, timed or requested
}

// dbDelta is what the database did during a phase, per event stored.
type dbDelta struct {
	WALBytesPerEvent float64 `json:"walBytesPerEvent"`
	FPIPerEvent      float64 `json:"fullPageImagesPerEvent"`
	CommitsPerSync   float64 `json:"commitsPerWalSync"` // how many commits shared a WAL flush
	CommitsPerEvent  float64 `json:"commitsPerEvent"`
	// BlocksReadPerEvent is how many pages PostgreSQL read into its shared buffers (from the
	// system's cache or the disk) per event: what it pays once a store outgrows its buffers.
	BlocksReadPerEvent float64 `json:"blocksReadPerEvent"`
	Checkpoints        int64   `json:"checkpoints"` // checkpoints that started during the phase
}

// sampleDB reads the statistics; ok is false where this server does not give them (before
// PostgreSQL 14 there is no pg_stat_wal).
func sampleDB(ctx context.Context, url string) dbSample {
	var s dbSample
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, url)
	if err != nil {
		return s
	}
	defer conn.Close(cctx)
	if err := conn.QueryRow(cctx, `SELECT wal_fpi, wal_bytes::bigint, wal_sync FROM pg_stat_wal`).
		Scan(&s.walFPI, &s.walBytes, &s.walSyncs); err != nil {
		return s
	}
	if err := conn.QueryRow(cctx, `SELECT xact_commit, blks_read FROM pg_stat_database WHERE datname = current_database()`).
		Scan(&s.commits, &s.blksRead); err != nil {
		return s
	}
	// PostgreSQL 17 moved the checkpoint counters to pg_stat_checkpointer.
	if err := conn.QueryRow(cctx, `SELECT num_timed + num_requested FROM pg_stat_checkpointer`).Scan(&s.checkpoints); err != nil {
		if err := conn.QueryRow(cctx, `SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter`).
			Scan(&s.checkpoints); err != nil {
			return s
		}
	}
	s.ok = true
	return s
}

// delta is what happened between a and b, per event of the phase's events.
func (a dbSample) delta(b dbSample, events int64) *dbDelta {
	if !a.ok || !b.ok || events <= 0 {
		return nil
	}
	per := func(x int64) float64 { return float64(x) / float64(events) }
	d := &dbDelta{
		WALBytesPerEvent:   per(b.walBytes - a.walBytes),
		FPIPerEvent:        per(b.walFPI - a.walFPI),
		CommitsPerEvent:    per(b.commits - a.commits),
		BlocksReadPerEvent: per(b.blksRead - a.blksRead),
		Checkpoints:        b.checkpoints - a.checkpoints,
	}
	if syncs := b.walSyncs - a.walSyncs; syncs > 0 {
		d.CommitsPerSync = float64(b.commits-a.commits) / float64(syncs)
	}
	return d
}

// ioCount is how many read and write system calls a process made, and the bytes they moved
// (the syscr, syscw, rchar and wchar of Linux's /proc/<pid>/io): files, sockets and pipes alike.
type ioCount struct {
	ok                                           bool
	readCalls, writeCalls, readBytes, writeBytes int64
}

// ioDelta is what the process that wrote the embedded store did in system calls per event
// during a phase: the server in a service phase, the bench in the others. A page SQLite finds
// in no cache of its own is one read call (a pread of the database file or the WAL), a page it
// writes to the WAL two write calls (the frame's header, then the page), a page a checkpoint
// copies into the database file one; a service phase's calls also count the HTTP requests'
// reads and writes (a few per request).
type ioDelta struct {
	ReadCallsPerEvent  float64 `json:"readCallsPerEvent"`
	WriteCallsPerEvent float64 `json:"writeCallsPerEvent"`
	ReadBytesPerEvent  float64 `json:"readBytesPerEvent"`
	WriteBytesPerEvent float64 `json:"writeBytesPerEvent"`
}

// ioPerEvent is the calls between samples a and b per event; nil when either is unknown or
// there were no events.
func ioPerEvent(a, b ioCount, events int64) *ioDelta {
	if !a.ok || !b.ok || events <= 0 {
		return nil
	}
	n := float64(events)
	return &ioDelta{
		ReadCallsPerEvent:  float64(b.readCalls-a.readCalls) / n,
		WriteCallsPerEvent: float64(b.writeCalls-a.writeCalls) / n,
		ReadBytesPerEvent:  float64(b.readBytes-a.readBytes) / n,
		WriteBytesPerEvent: float64(b.writeBytes-a.writeBytes) / n,
	}
}
