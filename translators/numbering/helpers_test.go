package numbering

import "time"

var testTime = time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)
