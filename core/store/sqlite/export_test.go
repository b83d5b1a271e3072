package sqlite

// HoldWriteLock is holdWriteLock, for the package's external tests.
var HoldWriteLock = holdWriteLock
